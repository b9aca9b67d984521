import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { getIntrospectionQuery } from 'graphql';
import type request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { aliases, chainedFragments, createOrders, FAN_OUT } from '../helpers/hostile.js';
import { codeOf, send, TRANSPORTS, type Transport } from '../helpers/transports.js';

type Agent = ReturnType<typeof request>;

const INTROSPECTION_VARIANTS = [
  getIntrospectionQuery(),
  getIntrospectionQuery({
    descriptions: true,
    specifiedByUrl: true,
    directiveIsRepeatable: true,
    schemaDescription: true,
    inputValueDeprecation: true,
  }),
  getIntrospectionQuery({ descriptions: false }),
];

describe('GraphQL limits on every transport (development)', () => {
  let server: TestServer;
  let alice: string;
  let carol: string;
  beforeAll(async () => {
    server = await startTestServer();
    ({ alice, carol } = await server.users());
  });
  afterAll(() => server.close());

  /** Alice's newest order: a refused batch of createOrder must leave it as it was. */
  const newestOrder = async () => {
    const res = await send(server.url, 'post', { query: '{ recentOrders(first: 1) { id } }' }, alice);
    return (res.body.data!.recentOrders as { id: string }[])[0]?.id;
  };

  /** Queries the pipeline admitted to run, on every transport (graphql_operations_total). */
  const admittedQueries = () => server.counter('graphql_operations_total{type="query"}').catch(() => 0);

  test('a document is parsed, held to the limits and validated once on every transport; a refused one is not kept', async () => {
    const parses = async () => ({
      prepare: await server.counter('graphql_document_parses_total{by="prepare"}'),
      apollo: await server.counter('graphql_document_parses_total{by="apollo"}'),
    });
    const before = await parses();
    // A text no other test sends: its record is built on the first request and read by the seven others.
    const query = '{ products { sku name } } # prepared once';
    for (const transport of TRANSPORTS) {
      for (let i = 0; i < 2; i++) {
        const res = await send(server.url, transport, { query });
        assert.equal(res.body.errors, undefined, `${transport} ${JSON.stringify(res.body.errors)}`);
      }
    }
    assert.deepEqual(await parses(), { prepare: before.prepare + 1, apollo: before.apollo });
    // Over the limits: refused where the record would be built, each time (nothing is kept), and never by Apollo.
    for (let i = 0; i < 2; i++) {
      const aliased = await send(server.url, 'post', { query: aliases(16, '__typename') });
      assert.match(aliased.body.errors![0]!.message, /16 aliases; at most 15/);
    }
    assert.deepEqual(await parses(), { prepare: before.prepare + 3, apollo: before.apollo });
    // One that does not validate has no record either: Apollo parses it again to report its errors as it always has.
    const typo = await send(server.url, 'post', { query: '{ products { skuu } }' });
    assert.equal(codeOf(typo), 'GRAPHQL_VALIDATION_FAILED');
    assert.deepEqual(await parses(), { prepare: before.prepare + 4, apollo: before.apollo + 1 });
  });

  test('the refused fan-out query sends no SQL statement over HTTP and SSE, where a one-order query sends some', async () => {
    const auth = { authorization: `Bearer ${carol}` };
    const over = {
      post: (query: string) => (agent: Agent) =>
        agent.post('/graphql').set(auth).set('accept', 'application/json').send({ query }),
      get: (query: string) => (agent: Agent) =>
        agent
          .get('/graphql')
          .set(auth)
          .set({ accept: 'application/json', 'apollo-require-preflight': 'true' })
          .query({ query }),
      sse: (query: string) => (agent: Agent) =>
        agent.get('/graphql/stream').set(auth).set('accept', 'text/event-stream').query({ query }).buffer(true),
    };
    // A token's first request on a replica also notes its owner's roles for webhooks (one statement, before any
    // query): carol's is seen once first, so what is counted below is the queries' own.
    assert.equal((await send(server.url, 'post', { query: '{ __typename }' }, carol)).status, 200);
    for (const [transport, build] of Object.entries(over)) {
      const refused = await server.sqlStatementsOf(build(FAN_OUT));
      assert.equal(refused.res.status, 200, transport);
      assert.match(refused.res.text, /QUERY_TOO_COMPLEX/, transport);
      assert.equal(refused.statements, 0, `${transport}: statements of the refused query`);
      const admitted = await admittedQueries();
      const control = await server.sqlStatementsOf(build('{ recentOrders(first: 1) { id } }'));
      assert.equal(control.res.status, 200, transport);
      assert.equal(await admittedQueries(), admitted + 1, `${transport}: a query that runs is counted admitted`);
      assert.ok(control.statements > 0, `${transport}: the same path counts the statements of a query that runs`);
    }
  });

  for (const transport of ['ws', 'sse'] as const) {
    test(`${transport}: a subscription is held to MAX_SUBSCRIPTION_COST per event, since every event runs it again`, async () => {
      const res = await send(
        server.url,
        transport,
        { query: 'subscription { orderCreated { id customer { orders { id items { sku } } } } }' },
        carol,
      );
      assert.equal(codeOf(res), 'QUERY_TOO_COMPLEX');
      assert.deepEqual(res.body.errors![0]!.extensions!.cost, { complexity: 422, maximum: 200 });
      assert.equal(
        res.body.errors![0]!.message,
        'The subscription could send 422 objects per event; at most 200 are allowed. Ask for smaller pages.',
      );
    });
  }

  test('a subscription sent over plain HTTP is a BAD_REQUEST that names the transports, not an internal error', async () => {
    const query = 'subscription { orderCreated { id } }';
    const json = await server.http.post('/graphql').set('accept', 'application/json').send({ query });
    assert.equal(json.status, 200);
    assert.deepEqual(json.body.data, undefined);
    assert.equal(json.body.errors[0].extensions.code, 'BAD_REQUEST');
    assert.match(
      json.body.errors[0].message,
      /over WebSocket .* at \/graphql and over server-sent events at \/graphql\/stream/,
    );
    const strict = await server.http
      .post('/graphql')
      .set('accept', 'application/graphql-response+json')
      .set('authorization', `Bearer ${carol}`)
      .send({ query });
    assert.equal(strict.status, 400);
    assert.equal(JSON.parse(strict.text).errors[0].extensions.code, 'BAD_REQUEST');
  });

  for (const transport of TRANSPORTS) {
    test(`${transport}: the 143-byte fan-out query is refused with its cost, before it runs`, async () => {
      const before = await admittedQueries();
      const res = await send(server.url, transport, { query: FAN_OUT }, carol);
      // application/json carries a request error in a 200; SSE answers it as the stream's one event.
      assert.equal(res.status, transport === 'ws' ? undefined : 200);
      assert.equal(codeOf(res), 'QUERY_TOO_COMPLEX');
      assert.deepEqual(res.body.errors![0]!.extensions!.cost, { complexity: 102_020_200, maximum: 10_000 });
      assert.equal(res.body.data, undefined);
      // The pipeline admitted no operation to run.
      assert.equal(await admittedQueries(), before);
    });

    test(`${transport}: a normal list query passes and reports its cost`, async () => {
      const res = await send(
        server.url,
        transport,
        { query: '{ recentOrders(first:100){id status customer{id name}} }' },
        carol,
      );
      assert.equal(res.body.errors, undefined);
      assert.ok((res.body.data!.recentOrders as unknown[]).length > 0);
      const cost = res.body.extensions!.cost as Record<string, number>;
      assert.equal(cost.complexity, 200);
      assert.equal(cost.requested, 2);
      assert.ok(cost.remaining! > 0 && cost.remaining! < 5000);
      assert.ok(cost.resetSeconds! > 0 && cost.resetSeconds! <= 3600);
    });

    test(`${transport}: chained fragment spreads are rejected by the depth limit`, async () => {
      const res = await send(server.url, transport, { query: chainedFragments() }, carol);
      assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
      assert.match(res.body.errors![0]!.message, /nested \d+ levels deep; at most 12/);
    });

    test(`${transport}: 1,000 aliases of recentOrders(first:100) are refused`, async () => {
      const res = await send(server.url, transport, { query: aliases(1000, 'recentOrders(first:100) { id }') }, carol);
      if (transport === 'get' || transport === 'sse') {
        // 30 KB of URL: Node's HTTP parser refuses it before any GraphQL code runs.
        assert.equal(res.status, 431);
        return;
      }
      assert.equal(codeOf(res), 'GRAPHQL_PARSE_FAILED');
      assert.match(res.body.errors![0]!.message, /1000 tokens/);
    });

    test(`${transport}: more aliases than MAX_ALIASES are refused`, async () => {
      const res = await send(server.url, transport, { query: aliases(16, '__typename') });
      assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
      assert.match(res.body.errors![0]!.message, /16 aliases; at most 15/);
    });

    test(`${transport}: more directives than MAX_DIRECTIVES are refused`, async () => {
      const res = await send(server.url, transport, { query: `{ ${'__typename @include(if: true) '.repeat(51)}}` });
      assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
      assert.match(res.body.errors![0]!.message, /51 directives; at most 50/);
    });

    test(`${transport}: a fragment or alias named __schema does not escape the depth limit`, async () => {
      const deep =
        'customer { orders { customer { orders { customer { orders { customer { orders { customer { orders { id } } } } } } } } } }';
      const viaFragment = `{ recentOrders { ...__schema } } fragment __schema on Order { customer { orders { ${deep} } } }`;
      const viaAlias = `{ __schema: recentOrders { customer { orders { ${deep} } } } }`;
      for (const query of [viaFragment, viaAlias]) {
        const res = await send(server.url, transport, { query }, carol);
        assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED', query);
        assert.match(res.body.errors![0]!.message, /nested \d+ levels deep/);
      }
    });

    test(`${transport}: getIntrospectionQuery() in all its variants passes in development`, async () => {
      for (const query of INTROSPECTION_VARIANTS) {
        const res = await send(server.url, transport, { query });
        assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
        assert.ok((res.body.data!.__schema as { types: unknown[] }).types.length > 10);
      }
    });

    test(`${transport}: introspection that nests its lists deeper than the standard query is refused`, async () => {
      const query = '{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }';
      const res = await send(server.url, transport, { query });
      assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
      assert.match(res.body.errors![0]!.message, /Introspection may nest/);
    });

    test(`${transport}: a typo is GRAPHQL_VALIDATION_FAILED, with suggestions in development`, async () => {
      const res = await send(server.url, transport, { query: '{ recentOrders { idd } }' }, carol);
      assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
      assert.match(res.body.errors![0]!.message, /Did you mean "id"\?/);
    });

    test(`${transport}: a bad variable is BAD_USER_INPUT`, async () => {
      const res = await send(
        server.url,
        transport,
        { query: 'query($n: Int) { recentOrders(first: $n) { id } }', variables: { n: 'many' } },
        carol,
      );
      assert.equal(codeOf(res), 'BAD_USER_INPUT');
    });
  }

  for (const transport of ['post', 'ws', 'sse'] as Transport[]) {
    test(`${transport}: 200 aliased createOrder are refused and create no order`, async () => {
      const before = await newestOrder();
      const res = await send(server.url, transport, { query: createOrders(200) }, alice);
      assert.equal(codeOf(res), 'GRAPHQL_PARSE_FAILED');
      assert.equal(await newestOrder(), before);
    });

    test(`${transport}: more mutation fields than MAX_MUTATIONS are refused and create no order`, async () => {
      const before = await newestOrder();
      const res = await send(server.url, transport, { query: createOrders(11) }, alice);
      assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
      assert.match(res.body.errors![0]!.message, /11 mutation fields; at most 10/);
      assert.equal(await newestOrder(), before);
    });
  }
});
