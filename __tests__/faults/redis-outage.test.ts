import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { Redis } from 'ioredis';
import request from 'supertest';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { startPostgres, startRedis, type PostgresCluster, type RedisServer } from '../helpers/infra.js';
import { eventually } from '../helpers/load.js';
import { startReplica, type Replica } from '../helpers/replica.js';
import { subscriber } from '../helpers/subscriber.js';

/** How many connections are subscribed to the replicas' event channel on this Redis. */
async function eventSubscribers(url: string): Promise<number> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await client.connect();
    const channels = (await client.call('PUBSUB', 'CHANNELS', 'orders-api:*:events')) as string[];
    if (!channels.length) return 0;
    const counts = (await client.call('PUBSUB', 'NUMSUB', ...channels)) as (string | number)[];
    return counts.filter((_, i) => i % 2 === 1).reduce<number>((sum, n) => sum + Number(n), 0);
  } finally {
    client.disconnect();
  }
}

const readiness = async (replica: Replica) => (await request(replica.url).get('/readyz').expect(200)).body as object;

let pg: PostgresCluster;
let auth: string;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(() => pg?.destroy());

async function placeOrder(url: string) {
  const res = await request(url)
    .post('/v1/orders')
    .set('authorization', auth)
    .set('idempotency-key', randomUUID())
    .send({ items: [{ sku: 'DL-009', qty: 1 }] })
    .expect(201);
  return (res.body as { id: string }).id;
}

describe('Redis stopped while two replicas run', () => {
  let redis: RedisServer;
  let a: Replica;
  let b: Replica;
  let sub: ReturnType<typeof subscriber>;
  let created: ReturnType<ReturnType<typeof subscriber>['subscribe']>;
  beforeAll(async () => {
    redis = await startRedis();
    a = await startReplica({ DATABASE_URL: pg.url, REDIS_URL: redis.url });
    b = await startReplica({ DATABASE_URL: pg.url, REDIS_URL: redis.url, OIDC_ISSUER: `${a.url}/idp` });
    const { accessToken } = await loginWithPkce({ issuer: `${a.url}/idp`, username: 'alice', password: 'alice' });
    auth = `Bearer ${accessToken}`;
    sub = subscriber(b.url, accessToken);
    await sub.connected();
    created = sub.subscribe('subscription { orderCreated { id } }');
  });
  afterAll(async () => {
    await sub?.dispose();
    await Promise.all([a?.stop('SIGKILL'), b?.stop('SIGKILL')]);
    await redis?.stop();
  });

  test('queries, REST and subscriptions keep working; events cross replicas by PostgreSQL polling', async () => {
    await eventually('both replicas to subscribe to Redis', async () => (await eventSubscribers(redis.url)) === 2);
    await redis.stop();
    for (const replica of [a, b]) {
      await eventually('/readyz to report Redis unavailable', async () => {
        const body = await readiness(replica);
        return JSON.stringify(body) === JSON.stringify({ status: 'ready', redis: 'unavailable' });
      });
    }
    const id = await placeOrder(a.url);
    await request(b.url).get(`/v1/orders/${id}`).set('authorization', auth).expect(200);
    await request(b.url)
      .post('/graphql')
      .set('authorization', auth)
      .send({ query: `{ order(id: "${id}") { id status } }` })
      .expect(200)
      .expect((res) => assert.deepEqual(res.body, { data: { order: { id, status: 'pending' } } }));

    await created.next(1);
    assert.deepEqual(
      created.received.map((r) => r.data),
      [{ orderCreated: { id } }],
    );
  });

  test('when Redis returns, both replicas reconnect and resubscribe, and events cross through it again', async () => {
    await redis.start();
    for (const replica of [a, b]) {
      await eventually('/readyz to report Redis ready', async () => {
        const body = await readiness(replica);
        return JSON.stringify(body) === JSON.stringify({ status: 'ready', redis: 'ready' });
      });
    }
    await eventually('both replicas to resubscribe', async () => (await eventSubscribers(redis.url)) === 2);
    const id = await placeOrder(a.url);
    await created.next(2);
    assert.deepEqual(created.received[1]?.data, { orderCreated: { id } });
    assert.ok(a.logs().some((e) => e.msg === 'Redis connected' && e.role === 'client'));
  });
});

describe('a replica that starts while Redis is down', () => {
  let redis: RedisServer;
  let c: Replica;
  beforeAll(async () => {
    redis = await startRedis({ started: false });
    c = await startReplica({ DATABASE_URL: pg.url, REDIS_URL: redis.url });
  });
  afterAll(async () => {
    await c?.stop('SIGKILL');
    await redis?.stop();
  });

  test('starts degraded, says so on /readyz and in its log, and serves', async () => {
    const warning = await c.waitForLog((e) => e.redis === 'unavailable', { seen: true });
    assert.match(String(warning.msg), /Redis is unavailable: starting degraded/);
    assert.deepEqual(await readiness(c), { status: 'ready', redis: 'unavailable' });
    const { accessToken } = await loginWithPkce({ issuer: `${c.url}/idp`, username: 'alice', password: 'alice' });
    auth = `Bearer ${accessToken}`;
    await placeOrder(c.url);
  });

  test('picks Redis up when it starts, and its event bus subscribes', async () => {
    await redis.start();
    await eventually('/readyz to report Redis ready', async () => {
      const body = await readiness(c);
      return JSON.stringify(body) === JSON.stringify({ status: 'ready', redis: 'ready' });
    });
    await eventually('the event bus to subscribe', async () => (await eventSubscribers(redis.url)) === 1);
    await c.waitForLog((e) => e.msg === 'Redis connected' && e.role === 'subscriber', { seen: true });
  });
});
