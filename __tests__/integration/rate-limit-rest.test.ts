import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { startRedis, type RedisServer } from '../helpers/infra.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const POINTS = 25;
const items = [{ sku: 'DL-009', qty: 1 }];

/** `"orders";r=12;t=3599` → { r: 12, t: 3599 } */
function rateLimit(header: string | undefined): { r: number; t: number } {
  const match = /^"orders";r=(\d+);t=(\d+)$/.exec(header ?? '');
  assert.ok(match, `RateLimit header: ${header}`);
  return { r: Number(match[1]), t: Number(match[2]) };
}

function createOrder(url: string, token: string) {
  return request(url)
    .post('/v1/orders')
    .set('authorization', `Bearer ${token}`)
    .set('idempotency-key', randomUUID())
    .send({ items });
}

describe('REST rate budget', () => {
  let server: TestServer;
  let tokens: { alice: string; bob: string; carol: string };

  beforeAll(async () => {
    // One proxy hop is trusted, so the tests can speak from different client addresses.
    server = await startTestServer({
      RATE_LIMIT_POINTS: String(POINTS),
      RATE_LIMIT_WINDOW_S: '3600',
      TRUST_PROXY: '1',
    });
    tokens = await server.users();
  });

  afterAll(async () => {
    await server.close();
  });

  test('every /v1 response carries RateLimit-Policy and RateLimit; reads cost 1 point, writes 10', async () => {
    const list = await request(server.url)
      .get('/v1/orders')
      .set('authorization', `Bearer ${tokens.alice}`)
      .expect(200)
      .expect('RateLimit-Policy', `"orders";q=${POINTS};w=3600`);
    const first = rateLimit(list.headers['ratelimit']);
    assert.equal(first.r, POINTS - 1);
    assert.ok(first.t >= 1 && first.t <= 3600);
    assert.equal(list.headers['retry-after'], undefined);

    const created = await createOrder(server.url, tokens.alice).expect(201);
    assert.equal(rateLimit(created.headers['ratelimit']).r, POINTS - 11);

    const read = await request(server.url)
      .get(created.headers['location']!)
      .set('authorization', `Bearer ${tokens.alice}`)
      .expect(200);
    assert.equal(rateLimit(read.headers['ratelimit']).r, POINTS - 12);

    const missing = await request(server.url)
      .get('/v1/no-such-thing')
      .set('authorization', `Bearer ${tokens.alice}`)
      .expect(404)
      .expect('content-type', /application\/problem\+json/);
    assert.equal(rateLimit(missing.headers['ratelimit']).r, POINTS - 13);

    const doc = await request(server.url)
      .get('/v1/openapi.json')
      .set('authorization', `Bearer ${tokens.alice}`)
      .expect(200);
    assert.equal(doc.headers['ratelimit'], undefined, 'the public, cacheable document is free');
    const after = await request(server.url).get('/v1/orders').set('authorization', `Bearer ${tokens.alice}`);
    assert.equal(rateLimit(after.headers['ratelimit']).r, POINTS - 14);
  });

  test('a spent budget is 429 problem+json with Retry-After, and a refused POST creates nothing', async () => {
    await createOrder(server.url, tokens.bob).expect(201);
    const last = await createOrder(server.url, tokens.bob).expect(201);
    const refused = await createOrder(server.url, tokens.bob)
      .expect(429)
      .expect('content-type', /^application\/problem\+json/)
      .expect('RateLimit-Policy', `"orders";q=${POINTS};w=3600`);
    const { r, t } = rateLimit(refused.headers['ratelimit']);
    assert.equal(r, POINTS - 20, 'the refused request spent nothing');
    assert.equal(refused.headers['retry-after'], String(t));
    assert.equal(refused.headers['cache-control'], 'no-store');
    assert.equal(refused.body.type, '/problems/rate-limited');
    assert.equal(refused.body.status, 429);
    assert.equal(refused.body.code, 'RATE_LIMITED');
    assert.equal(refused.body.instance, '/v1/orders');
    assert.match(refused.body.detail, /retry in \d+ seconds/);

    // Reads are cheaper, so they still fit in what is left.
    const mine = await request(server.url).get('/v1/orders').set('authorization', `Bearer ${tokens.bob}`).expect(200);
    assert.equal(mine.body.orders[0].id, last.body.id, 'the refused POST created no order');

    await request(server.url).get('/problems/rate-limited').expect(200).expect('content-type', /html/);
  });

  test('different users have separate budgets', async () => {
    for (let i = 0; i < POINTS; i++) {
      await request(server.url).get('/v1/orders').set('authorization', `Bearer ${tokens.carol}`).expect(200);
    }
    await request(server.url).get('/v1/orders').set('authorization', `Bearer ${tokens.carol}`).expect(429);
    const alice = await request(server.url)
      .get('/v1/orders')
      .set('authorization', `Bearer ${tokens.alice}`)
      .expect(200);
    assert.ok(rateLimit(alice.headers['ratelimit']).r > 0);
  });

  test('anonymous callers are keyed by their address', async () => {
    const anonymous = (ip: string) => request(server.url).get('/v1/orders').set('x-forwarded-for', ip);
    for (let i = 0; i < POINTS; i++) {
      const res = await anonymous('203.0.113.7').expect(401);
      assert.equal(rateLimit(res.headers['ratelimit']).r, POINTS - 1 - i);
    }
    const refused = await anonymous('203.0.113.7')
      .expect(429)
      .expect('content-type', /problem\+json/);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    const elsewhere = await anonymous('203.0.113.8').expect(401);
    assert.equal(rateLimit(elsewhere.headers['ratelimit']).r, POINTS - 1);
    // A signed-in caller at the spent address spends their own budget.
    await request(server.url)
      .get('/v1/orders')
      .set('x-forwarded-for', '203.0.113.7')
      .set('authorization', `Bearer ${tokens.alice}`)
      .expect(200);
  });
});

describe('REST rate budget shared through Redis', () => {
  let redis: RedisServer;
  let a: TestServer;
  let b: TestServer;

  beforeAll(async () => {
    redis = await startRedis();
    const env = { REDIS_URL: redis.url, RATE_LIMIT_POINTS: String(POINTS) };
    a = await startTestServer(env);
    b = await startTestServer({ ...env, OIDC_ISSUER: a.running.app.issuer }, { sameDatabaseAs: a });
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
    await redis?.stop();
  });

  test('points spent on one replica are gone on the other', async () => {
    const alice = await a.token('alice');
    await createOrder(a.url, alice).expect(201);
    const last = await createOrder(a.url, alice).expect(201);
    const onB = await request(b.url).get('/v1/orders').set('authorization', `Bearer ${alice}`).expect(200);
    assert.equal(rateLimit(onB.headers['ratelimit']).r, POINTS - 21);
    await createOrder(b.url, alice).expect(429);
    const onA = await request(a.url).get('/v1/orders').set('authorization', `Bearer ${alice}`).expect(200);
    assert.equal(rateLimit(onA.headers['ratelimit']).r, POINTS - 22);
    assert.equal(onA.body.orders[0].id, last.body.id, 'the refused POST created no order');
  });
});
