import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { serverAudits } from 'graphql-http';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('GraphQL over HTTP', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  test('passes every graphql-http server audit (MUST, SHOULD and MAY) with no warning or notice', async () => {
    const audits = serverAudits({ url: `${server.url}/graphql` });
    const results = await Promise.all(audits.map(async (audit) => ({ name: audit.name, result: await audit.fn() })));
    const notOk = results
      .filter(({ result }) => result.status !== 'ok')
      .map(({ name, result }) => `${result.status}: ${name}: ${'reason' in result ? result.reason : ''}`);
    assert.deepEqual(notOk, []);
    assert.ok(results.length >= 60, `expected the full audit list, ran ${results.length}`);
  });

  test('answers a malformed JSON body with a clean GraphQL error and 400, also for application/json', async () => {
    const res = await server.http
      .post('/graphql')
      .set({ 'content-type': 'application/json', accept: 'application/json' })
      .send('{"query": ');
    assert.equal(res.status, 400);
    assert.equal(res.get('content-type'), 'application/json; charset=utf-8');
    assert.deepEqual(res.body, {
      errors: [{ message: 'The request body is not valid JSON.', extensions: { code: 'BAD_REQUEST' } }],
    });
  });

  test('answers a malformed JSON body with 400 for application/graphql-response+json', async () => {
    const res = await server.http
      .post('/graphql')
      .set({ 'content-type': 'application/json', accept: 'application/graphql-response+json' })
      .send('{"query": ');
    assert.equal(res.status, 400);
    assert.equal(res.get('content-type'), 'application/graphql-response+json; charset=utf-8');
    assert.equal((JSON.parse(res.text) as { data?: unknown }).data, undefined);
  });

  test('refuses a mutation over GET with 405 and Allow: POST', async () => {
    const path = `/graphql?query=${encodeURIComponent('mutation { cancelOrder(id: "x") { id } }')}`;
    const res = await server.http.get(path).set({ accept: 'application/json' });
    assert.equal(res.status, 405);
    assert.equal(res.get('allow'), 'POST');
    const body = res.body as { data?: unknown; errors: unknown[] };
    assert.equal(body.data, undefined);
    assert.equal(body.errors.length, 1);
  });

  test('refuses other methods with 405 and Allow', async () => {
    const res = await server.http.put('/graphql').set({ accept: 'application/json' });
    assert.equal(res.status, 405);
    assert.equal(res.get('allow'), 'GET, POST');
  });

  test('refuses a POST without a JSON content type with 415', async () => {
    const res = await server.http
      .post('/graphql')
      .set({ 'content-type': 'text/plain', accept: 'application/json' })
      .send('{ __typename }');
    assert.equal(res.status, 415);
    assert.deepEqual(res.body, {
      errors: [
        {
          message: 'POST requests must send Content-Type: application/json.',
          extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' },
        },
      ],
    });
  });

  test('refuses a body over 100 kB with 413', async () => {
    const res = await server.http
      .post('/graphql')
      .set({ 'content-type': 'application/json', accept: 'application/json' })
      .send(JSON.stringify({ query: `{ __typename }${' '.repeat(110_000)}` }));
    assert.equal(res.status, 413);
    assert.equal(
      (res.body as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code,
      'PAYLOAD_TOO_LARGE',
    );
  });

  test('refuses batched requests with a clear error', async () => {
    const res = await server.http
      .post('/graphql')
      .set({ 'content-type': 'application/json', accept: 'application/json' })
      .send(JSON.stringify([{ query: '{ __typename }' }]));
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, {
      errors: [
        {
          message: 'Batched requests are not supported; send one operation per request.',
          extensions: { code: 'BAD_REQUEST' },
        },
      ],
    });
  });

  test('serves public data over a plain GET with a shared-cache Cache-Control', async () => {
    const res = await server.http.get(`/graphql?query=${encodeURIComponent('{ products { sku priceCents } }')}`);
    assert.equal(res.status, 200);
    assert.equal(res.get('cache-control'), 'max-age=300, public');
    assert.match(res.get('vary') ?? '', /Accept/);
    const body = res.body as { data: { products: { sku: string }[] } };
    assert.equal(body.data.products.length, 20);
  });

  test('marks responses holding private data uncacheable', async () => {
    const token = await server.token('alice');
    const res = await server.http
      .get(`/graphql?query=${encodeURIComponent('{ recentOrders(first: 1) { id } }')}`)
      .set({ authorization: `Bearer ${token}` });
    assert.equal(res.status, 200);
    assert.equal(res.get('cache-control'), 'no-store');
  });

  test('serves automatic persisted queries over GET, as mobile clients send them', async () => {
    const { createHash, randomUUID } = await import('node:crypto');
    // Unique per run: the persisted-query cache may be a Redis shared with earlier runs.
    const query = `query Apq_${randomUUID().replace(/-/g, '')} { products { sku name } }`;
    const sha256Hash = createHash('sha256').update(query).digest('hex');
    const extensions = encodeURIComponent(JSON.stringify({ persistedQuery: { version: 1, sha256Hash } }));
    const getPath = `/graphql?extensions=${extensions}`;
    const headers = { 'apollo-require-preflight': 'true', accept: 'application/json' };

    const miss = await server.http.get(getPath).set(headers);
    assert.equal(miss.status, 200);
    const missBody = miss.body as { errors: { extensions: { code: string } }[] };
    assert.equal(missBody.errors[0]!.extensions.code, 'PERSISTED_QUERY_NOT_FOUND');

    const register = await server.http
      .post('/graphql')
      .set({ 'content-type': 'application/json', accept: 'application/json' })
      .send(JSON.stringify({ query, extensions: { persistedQuery: { version: 1, sha256Hash } } }));
    assert.equal(register.status, 200);

    const hit = await server.http.get(getPath).set(headers);
    assert.equal(hit.status, 200);
    assert.equal(hit.get('cache-control'), 'max-age=300, public');
    const hitBody = hit.body as { data: { products: unknown[] } };
    assert.equal(hitBody.data.products.length, 20);
  });

  test('refuses a cookie-bearing simple GET without a preflight header (CSRF), allows it with one', async () => {
    const path = `/graphql?query=${encodeURIComponent('{ products { sku } }')}`;
    const blocked = await server.http.get(path).set({ cookie: 'orders_session=abc', accept: 'application/json' });
    assert.equal(blocked.status, 400);
    const body = blocked.body as { errors: { extensions: { code: string } }[] };
    assert.equal(body.errors[0]!.extensions.code, 'BAD_REQUEST');

    const allowed = await server.http
      .get(path)
      .set({ cookie: 'sid=abc', accept: 'application/json', 'apollo-require-preflight': 'true' });
    assert.equal(allowed.status, 200);
  });

  test('serves the Sandbox landing page to a browser outside production', async () => {
    const res = await server.http.get('/graphql').set({ accept: 'text/html' });
    assert.equal(res.status, 200);
    assert.match(res.get('content-type') ?? '', /^text\/html/);
    assert.match(res.text, /embeddable-sandbox|Apollo Sandbox/i);
  });
});
