import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sseSubscriber } from '../helpers/sseSubscriber.js';
import { subscriber } from '../helpers/subscriber.js';
import { send, TRANSPORTS } from '../helpers/transports.js';

/** The whole exposition text from the metrics port. */
async function scrape(server: TestServer): Promise<string> {
  const res = await request(server.running.metricsUrl!).get('/metrics');
  assert.equal(res.status, 200);
  assert.match(res.headers['content-type'] ?? '', /^text\/plain; version=0\.0\.4/);
  assert.equal(res.headers['cache-control'], 'no-store');
  return res.text;
}

describe('operational endpoints', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  test('/metrics counts GraphQL errors by code, apart from HTTP statuses', async () => {
    await server.gql('{ recentOrders { id } }'); // anonymous: UNAUTHENTICATED inside a 200
    const text = await scrape(server);
    assert.match(text, /^graphql_errors_total\{code="UNAUTHENTICATED"\} [1-9]/m);
    assert.match(text, /^http_requests_total\{route="\/graphql",method="POST",status="200"\} [1-9]/m);
    assert.match(text, /^sql_statements_total [1-9]/m);
  });

  test('/metrics is served on METRICS_PORT only: the public port answers 404, the metrics port nothing else', async () => {
    const metricsPort = Number(new URL(server.running.metricsUrl!).port);
    assert.ok(metricsPort > 0 && metricsPort !== Number(new URL(server.url).port));
    const pub = await server.http.get('/metrics');
    assert.equal(pub.status, 404);
    assert.equal(pub.get('content-type'), 'application/problem+json; charset=utf-8');
    assert.equal(pub.body.type, '/problems/route-not-found');
    const other = await request(server.running.metricsUrl!).get('/graphql');
    assert.equal(other.status, 404);
    assert.equal(other.text, 'Only GET /metrics is served here.\n');
    const post = await request(server.running.metricsUrl!).post('/metrics');
    assert.equal(post.status, 404);
  });

  test('GraphQL operations are counted by type on all four transports', async () => {
    const token = await server.token('alice');
    const count = async (type: string) => server.counter(`graphql_operations_total{type="${type}"}`).catch(() => 0);
    const before = await count('query');
    for (const transport of TRANSPORTS) {
      const out = await send(server.url, transport, { query: '{ products { sku } }' }, token);
      assert.ok(out.body.data, `${transport}: ${JSON.stringify(out.body)}`);
    }
    assert.equal(await count('query'), before + TRANSPORTS.length);
  });

  test('open subscriptions are a gauge: up while a WebSocket or SSE subscription is open, down when it ends', async () => {
    const token = await server.token('bob');
    const open = () => server.counter('graphql_subscriptions_open');
    const before = await open();
    const ws = subscriber(server.url, token);
    let listening = server.nextSubscription();
    const wsStream = ws.subscribe('subscription { orderCreated { id } }');
    await listening;
    assert.equal(await open(), before + 1);
    listening = server.nextSubscription();
    const sse = sseSubscriber(server.url, token, 'subscription { orderCreated { id } }');
    await listening;
    assert.equal(await open(), before + 2);
    wsStream.dispose();
    sse.close();
    await ws.dispose();
    // The server learns of each end asynchronously: wait for the gauge itself, not for time.
    while ((await open()) !== before) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(await open(), before);
  });

  test('the root names the entry points', async () => {
    const res = await server.http.get('/');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      service: 'orders-api',
      graphql: '/graphql',
      rest: '/v1/orders',
      openapi: '/v1/openapi.json',
      signIn: '/auth/login',
      session: '/auth/session',
    });
  });

  test('an unknown path is a 404 problem+json, whose instance leaves the query out', async () => {
    const res = await server.http.get('/nope?x=1');
    assert.equal(res.status, 404);
    assert.equal(res.get('content-type'), 'application/problem+json; charset=utf-8');
    assert.deepEqual(res.body, {
      type: '/problems/route-not-found',
      title: 'No such resource',
      status: 404,
      detail: 'Nothing is served at /nope.',
      instance: '/nope',
      code: 'ROUTE_NOT_FOUND',
    });
  });

  test('/readyz turns 503 once draining starts, while /healthz stays 200', async () => {
    // A second instance over the same database: draining it leaves the file's server alone.
    const own = await startTestServer({}, { sameDatabaseAs: server });
    try {
      assert.equal((await own.http.get('/readyz')).status, 200);
      own.running.app.startDraining();
      const ready = await own.http.get('/readyz');
      assert.equal(ready.status, 503);
      assert.deepEqual(ready.body, { status: 'draining' });
      assert.equal((await own.http.get('/healthz')).status, 200);
    } finally {
      await own.close();
    }
  });

  test('a restart keeps the identity provider keys, so issued tokens stay valid', async () => {
    const token = await server.token('alice');
    const jwks = (await server.http.get('/idp/jwks')).body as unknown;
    assert.ok((jwks as { keys: unknown[] }).keys.length >= 1);
    // The keys live in the database: the IdP re-reads them instead of generating new ones.
    const [row] = await server.running.app.db.query<{ n: number }>('select count(*)::int as n from idp_keys');
    assert.equal(row!.n, 1);
    const res = await server.gql('{ viewer { subject } }', undefined, { token });
    assert.deepEqual(res.body.data, { viewer: { subject: 'alice' } });
  });
});

describe('refusals on the metrics port', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ RATE_LIMIT_POINTS: '3', RATE_LIMIT_WINDOW_S: '600', MAX_QUERY_DEPTH: '3' });
  });
  afterAll(() => server.close());
  const refusals = (reason: string) => server.counter(`refusals_total{reason="${reason}"}`).catch(() => 0);

  test('a document over the static limits is refused and counted as query_limits', async () => {
    const before = await refusals('query_limits');
    const res = await server.gql('{ recentOrders { items { product { name } } } }');
    assert.equal(res.body.errors?.[0]?.extensions?.code, 'GRAPHQL_VALIDATION_FAILED');
    assert.equal(await refusals('query_limits'), before + 1);
  });

  test('a spent rate budget is refused with 429 on REST and GraphQL and counted as rate_budget', async () => {
    const token = await server.token('carol');
    const before = await refusals('rate_budget');
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await server.http.get('/v1/orders').set('authorization', `Bearer ${token}`);
      statuses.push(res.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
    const gql = await server.gql('{ products { sku } }', undefined, { token });
    assert.equal(gql.status, 429);
    assert.equal(gql.body.errors?.[0]?.extensions?.code, 'RATE_LIMITED');
    assert.equal(await refusals('rate_budget'), before + 3);
  });
});

describe('METRICS_PORT=off', () => {
  test('serves no metrics at all, and the public port still does not', async () => {
    const server = await startTestServer({ METRICS_PORT: 'off' });
    try {
      assert.equal(server.running.metricsUrl, undefined);
      assert.equal((await server.http.get('/metrics')).status, 404);
    } finally {
      await server.close();
    }
  });
});
