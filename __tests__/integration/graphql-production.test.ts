import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { getIntrospectionQuery } from 'graphql';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { aliases, chainedFragments, createOrders, FAN_OUT } from '../helpers/hostile.js';
import { codeOf, send, TRANSPORTS, type Transport } from '../helpers/transports.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

const TRUSTED = '{ products { sku name } }';
const UNTRUSTED = '{ products { sku } }';
/** Production's one answer to graphql's own introspection query, which selects 39 introspection fields. */
const INTROSPECTION_REFUSED =
  'GraphQL introspection has been disabled, but the requested query contained the field "__schema".';

describe('GraphQL in production, on every transport', () => {
  let dev: TestServer;
  let prod: TestServer;
  let trusted: TestServer;
  let alice: string;
  beforeAll(async () => {
    // Production refuses the embedded IdP and database, so it trusts a development instance's IdP and
    // borrows its database, as replicas do.
    dev = await startTestServer();
    const issuer = dev.running.app.issuer;
    prod = await startTestServer({ NODE_ENV: 'production', OIDC_ISSUER: issuer }, { sameDatabaseAs: dev });
    const manifest = join(mkdtempSync(join(tmpdir(), 'orders-manifest-')), 'persisted-documents.json');
    writeFileSync(manifest, JSON.stringify({ [sha256(TRUSTED)]: TRUSTED }));
    trusted = await startTestServer(
      { NODE_ENV: 'production', OIDC_ISSUER: issuer, PERSISTED_DOCUMENTS: manifest },
      { sameDatabaseAs: dev },
    );
    alice = await dev.token('alice');
  });
  afterAll(async () => {
    await trusted.close();
    await prod.close();
    await dev.close();
  });

  /** `graphql_document_parses_total` of the trusted-documents server, by who parsed. */
  async function parses(): Promise<Record<string, number>> {
    const res = await request(trusted.running.metricsUrl!).get('/metrics').expect(200);
    const counts: Record<string, number> = {};
    for (const [, by, value] of (res.text as string).matchAll(/^graphql_document_parses_total\{by="(\w+)"\} (\d+)$/gm))
      counts[by!] = Number(value);
    return counts;
  }

  test('the manifest is prepared at start: its document then runs by hash, id or text on every transport unparsed', async () => {
    // Before any request: the one trusted document was parsed and validated once, while the server started.
    assert.deepEqual(await parses(), { prepare: 1, apollo: 0 });
    for (const transport of TRANSPORTS) {
      for (const params of [
        { query: '', extensions: { persistedQuery: { version: 1, sha256Hash: sha256(TRUSTED) } } },
        { documentId: `sha256:${sha256(TRUSTED)}` },
        { query: TRUSTED },
      ]) {
        const res = await send(trusted.url, transport, params);
        assert.equal(res.body.errors, undefined, `${transport} ${JSON.stringify(res.body.errors)}`);
        assert.ok((res.body.data!.products as unknown[]).length > 0);
      }
    }
    // Neither the front door nor Apollo parsed it again.
    assert.deepEqual(await parses(), { prepare: 1, apollo: 0 });
  });

  for (const transport of TRANSPORTS) {
    test(`${transport}: getIntrospectionQuery() is refused with one error`, async () => {
      const res = await send(prod.url, transport, { query: getIntrospectionQuery() });
      assert.deepEqual(
        res.body.errors?.map((e) => [e.message, e.extensions?.code]),
        [[INTROSPECTION_REFUSED, 'GRAPHQL_VALIDATION_FAILED']],
      );
      assert.equal(res.body.data, undefined);
    });

    test(`${transport}: a __type lookup is refused, while __typename still works`, async () => {
      const refused = await send(prod.url, transport, { query: '{ __type(name: "Order") { fields { name } } }' });
      // Two introspection fields (__type, fields), one error in graphql's NoSchemaIntrospectionCustomRule words.
      assert.deepEqual(
        refused.body.errors?.map((e) => [e.message, e.extensions?.code]),
        [
          [
            'GraphQL introspection has been disabled, but the requested query contained the field "__type".',
            'GRAPHQL_VALIDATION_FAILED',
          ],
        ],
      );
      const typename = await send(prod.url, transport, { query: '{ __typename }' });
      assert.deepEqual(typename.body.data, { __typename: 'Query' });
    });

    test(`${transport}: a typo is GRAPHQL_VALIDATION_FAILED without "Did you mean"`, async () => {
      const res = await send(prod.url, transport, { query: '{ recentOrders { idd } }' }, alice);
      assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
      assert.match(res.body.errors![0]!.message, /Cannot query field "idd"/);
      assert.doesNotMatch(res.body.errors![0]!.message, /Did you mean/);
    });

    test(`${transport}: trusted documents run by hash`, async () => {
      const res = await send(trusted.url, transport, {
        query: '',
        extensions: { persistedQuery: { version: 1, sha256Hash: sha256(TRUSTED) } },
      });
      assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
      assert.ok((res.body.data!.products as unknown[]).length > 0);
    });

    test(`${transport}: trusted documents run by documentId`, async () => {
      const res = await send(trusted.url, transport, { documentId: `sha256:${sha256(TRUSTED)}` });
      assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
      assert.ok((res.body.data!.products as unknown[]).length > 0);
    });

    test(`${transport}: a full text runs only when its hash is in the manifest`, async () => {
      const known = await send(trusted.url, transport, { query: TRUSTED });
      assert.equal(known.body.errors, undefined);
      const unknown = await send(trusted.url, transport, { query: UNTRUSTED });
      assert.equal(codeOf(unknown), 'PERSISTED_QUERY_NOT_TRUSTED');
      const introspection = await send(trusted.url, transport, { query: getIntrospectionQuery() });
      assert.equal(codeOf(introspection), 'PERSISTED_QUERY_NOT_TRUSTED');
    });

    test(`${transport}: an unknown hash is PERSISTED_QUERY_NOT_FOUND`, async () => {
      const res = await send(trusted.url, transport, {
        query: '',
        extensions: { persistedQuery: { version: 1, sha256Hash: sha256(UNTRUSTED) } },
      });
      assert.equal(codeOf(res), 'PERSISTED_QUERY_NOT_FOUND');
    });
  }

  for (const transport of TRANSPORTS) {
    test(`${transport}: the limits hold in production too`, async () => {
      const fanOut = await send(prod.url, transport, { query: FAN_OUT }, alice);
      assert.equal(codeOf(fanOut), 'QUERY_TOO_COMPLEX');
      const chained = await send(prod.url, transport, { query: chainedFragments() });
      assert.match(chained.body.errors![0]!.message, /nested \d+ levels deep; at most 12/);
      const aliased = await send(prod.url, transport, { query: aliases(16, '__typename') });
      assert.match(aliased.body.errors![0]!.message, /16 aliases; at most 15/);
      const directives = await send(prod.url, transport, {
        query: `{ ${'__typename @include(if: true) '.repeat(51)}}`,
      });
      assert.match(directives.body.errors![0]!.message, /51 directives; at most 50/);
      const tokens = await send(prod.url, transport, { query: aliases(400, '__typename') });
      assert.equal(codeOf(tokens), 'GRAPHQL_PARSE_FAILED');
      if (transport !== 'get') {
        const mutations = await send(prod.url, transport, { query: createOrders(11) }, alice);
        assert.match(mutations.body.errors![0]!.message, /11 mutation fields; at most 10/);
      }
    });
  }

  for (const transport of ['post', 'ws', 'sse'] as Transport[]) {
    test(`${transport}: a variable error is BAD_USER_INPUT without "Did you mean"`, async () => {
      const res = await send(
        prod.url,
        transport,
        {
          query: 'mutation($input: CreateOrderInput!) { createOrder(input: $input) { id } }',
          variables: { input: { itemz: [] } },
        },
        alice,
      );
      assert.equal(codeOf(res), 'BAD_USER_INPUT');
      assert.match(res.body.errors![0]!.message, /itemz/);
      assert.doesNotMatch(res.body.errors![0]!.message, /Did you mean/);
    });
  }

  test('an anonymous GET /graphql/stream for the schema is refused', async () => {
    const res = await request(prod.url)
      .get('/graphql/stream')
      .query({ query: '{ __schema { types { name fields { name } } } }' })
      .set('accept', 'text/event-stream')
      .buffer(true);
    assert.doesNotMatch(res.text, /"types"/);
    assert.match(res.text, /GRAPHQL_VALIDATION_FAILED/);
  });

  test('APQ registration is off in trusted-documents mode', async () => {
    const extensions = { persistedQuery: { version: 1, sha256Hash: sha256(UNTRUSTED) } };
    await request(trusted.url).post('/graphql').send({ query: UNTRUSTED, extensions }).expect(400);
    const lookup = await send(trusted.url, 'post', { extensions });
    assert.equal(codeOf(lookup), 'PERSISTED_QUERY_NOT_FOUND');
  });
});
