import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Cache-Control comes from each document's @cacheControl hints, worked out once per document (Apollo's per-field
 * plugin is off): the answers must be those the plugin gave, including for documents seen a second time (from the
 * document store), documents whose fields depend on @include/@skip, and responses with errors.
 */
describe('Cache-Control from the document', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  const get = (query: string, variables?: Record<string, unknown>, token?: string) => {
    const vars = variables ? `&variables=${encodeURIComponent(JSON.stringify(variables))}` : '';
    const req = server.http.get(`/graphql?query=${encodeURIComponent(query)}${vars}`);
    return token ? req.set({ authorization: `Bearer ${token}` }) : req;
  };

  test('public data is public the first time and when the document comes from the store', async () => {
    for (let i = 0; i < 2; i++) {
      const res = await get('{ products { sku } product(sku: "KB-001") { name } }');
      assert.equal(res.status, 200);
      assert.equal(res.get('cache-control'), 'max-age=300, public');
      // A shared cache would hand this caller's budget to everyone.
      assert.equal(res.get('ratelimit'), undefined);
      assert.equal(res.get('ratelimit-policy'), undefined);
    }
  });

  test('the viewer or orders make the whole response no-store, and keep the RateLimit headers', async () => {
    const token = await server.token('alice');
    for (const query of [
      '{ products { sku } viewer { subject } }',
      '{ products { sku } recentOrders(first: 1) { id } }',
    ]) {
      const res = await get(query, undefined, token);
      assert.equal(res.status, 200);
      assert.equal((res.body as { errors?: unknown }).errors, undefined);
      assert.equal(res.get('cache-control'), 'no-store');
      assert.ok(res.get('ratelimit'));
    }
    // Anonymous: the viewer field is asked for (and is null), so the response is private all the same.
    assert.equal((await get('{ products { sku } viewer { subject } }')).get('cache-control'), 'no-store');
  });

  test('@include and @skip decide per request, with the variables', async () => {
    const query = 'query ($me: Boolean!) { products { sku } viewer @include(if: $me) { subject } }';
    assert.equal((await get(query, { me: false })).get('cache-control'), 'max-age=300, public');
    assert.equal((await get(query, { me: true })).get('cache-control'), 'no-store');
    assert.equal((await get(query, { me: false })).get('cache-control'), 'max-age=300, public');
    const skipped = 'query ($hide: Boolean = true) { products { sku } viewer @skip(if: $hide) { subject } }';
    assert.equal((await get(skipped)).get('cache-control'), 'max-age=300, public');
    assert.equal((await get(skipped, { hide: false })).get('cache-control'), 'no-store');
  });

  test('errors, meta fields alone and request errors are no-store', async () => {
    const failed = await get('{ products { sku } recentOrders(first: 1) { id } }');
    assert.equal(
      (failed.body as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code,
      'UNAUTHENTICATED',
    );
    assert.equal(failed.get('cache-control'), 'no-store');
    assert.equal((await get('{ __typename }')).get('cache-control'), 'no-store');
    assert.equal((await get('{ products { nope } }')).get('cache-control'), 'no-store');
  });
});
