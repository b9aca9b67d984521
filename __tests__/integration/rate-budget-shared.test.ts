import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { startRedis, type RedisServer } from '../helpers/infra.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const POINTS = 25;
const LIST = '{ recentOrders(first: 5) { id } }';

/** `"orders";r=12;t=3599` → 12 */
function remaining(header: string | undefined): number {
  const match = /^"orders";r=(\d+);t=\d+$/.exec(header ?? '');
  assert.ok(match, `RateLimit header: ${header}`);
  return Number(match[1]);
}

describe('one rate budget per client across REST, GraphQL and replicas (Redis)', () => {
  let redis: RedisServer;
  let a: TestServer;
  let b: TestServer;

  beforeAll(async () => {
    redis = await startRedis();
    const env = { REDIS_URL: redis.url, RATE_LIMIT_POINTS: String(POINTS), RATE_LIMIT_WINDOW_S: '3600' };
    a = await startTestServer(env);
    b = await startTestServer({ ...env, OIDC_ISSUER: a.running.app.issuer }, { sameDatabaseAs: a });
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
    await redis?.stop();
  });

  const graphql = (server: TestServer, token: string) =>
    request(server.url)
      .post('/graphql')
      .set('authorization', `Bearer ${token}`)
      .set('content-type', 'application/json')
      .send({ query: LIST });
  const restList = (server: TestServer, token: string) =>
    request(server.url).get('/v1/orders').set('authorization', `Bearer ${token}`);
  const restCreate = (server: TestServer, token: string) =>
    request(server.url)
      .post('/v1/orders')
      .set('authorization', `Bearer ${token}`)
      .set('idempotency-key', randomUUID())
      .send({ items: [{ sku: 'DL-009', qty: 1 }] });

  test('GraphQL cost on one replica and REST prices on the other spend the same budget, until both refuse', async () => {
    const alice = await a.token('alice');
    const first = await graphql(b, alice).expect(200);
    assert.equal(first.body.extensions.cost.requested, 1);
    assert.equal(first.body.extensions.cost.remaining, POINTS - 1);
    assert.equal(remaining(first.headers['ratelimit']), POINTS - 1);

    const listed = await restList(a, alice).expect(200);
    assert.equal(remaining(listed.headers['ratelimit']), POINTS - 2);
    await restCreate(a, alice).expect(201);
    await restCreate(a, alice).expect(201);

    const after = await graphql(b, alice).expect(200);
    assert.equal(after.body.extensions.cost.remaining, POINTS - 23);
    await graphql(b, alice).expect(200);
    await graphql(a, alice).expect(200);

    const refusedGraphql = await graphql(b, alice).expect(429);
    assert.equal(refusedGraphql.body.errors[0].extensions.code, 'RATE_LIMITED');
    assert.ok(Number(refusedGraphql.headers['retry-after']) > 0);
    const refusedRest = await restList(a, alice).expect(429);
    assert.equal(refusedRest.headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.equal(refusedRest.body.code, 'RATE_LIMITED');
    assert.ok(Number(refusedRest.headers['retry-after']) > 0);

    // Another client's budget is its own.
    const bob = await a.token('bob');
    const bobs = await graphql(b, bob).expect(200);
    assert.equal(bobs.body.extensions.cost.remaining, POINTS - 1);
  });
});
