import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { startPostgres, type PostgresCluster } from '../helpers/infra.js';
import { eventually } from '../helpers/load.js';
import { startReplica, type Replica } from '../helpers/replica.js';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../helpers/webhookReceiver.js';

const TIMEOUT_MS = 2000;
/** Receivers are on loopback; the schedule is short so that a test sees several attempts. */
const ENV = {
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
  WEBHOOK_POLL_MS: '200',
  WEBHOOK_RETRY_SCHEDULE_S: '0,1,1,1,1,1,1,1',
};

/** The sum of webhook_deliveries_total over its results, from a replica's /metrics. */
async function attemptsCounted(replica: Replica): Promise<number> {
  const res = await request(replica.metricsUrl!).get('/metrics').expect(200);
  return res.text
    .split('\n')
    .filter((l) => l.startsWith('webhook_deliveries_total{'))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

/**
 * At least once, across replicas and crashes, on a PostgreSQL of this test's own (stopped and started by the test):
 * real replica processes, a real receiver on loopback.
 */
describe('webhook delivery through crashes, replicas and a database outage', () => {
  let pg: PostgresCluster;
  const receivers: WebhookReceiver[] = [];
  const replicas: Replica[] = [];

  const replica = async (env: Record<string, string> = {}, port?: number) => {
    const r = await startReplica({ DATABASE_URL: pg.url, ...ENV, ...env }, port ? { port } : {});
    replicas.push(r);
    return r;
  };
  const receiver = async () => {
    const r = await startWebhookReceiver();
    receivers.push(r);
    return r;
  };
  const tokenFrom = async (issuer: string, user = 'alice') =>
    (await loginWithPkce({ issuer: `${issuer}/idp`, username: user, password: user })).accessToken;
  const createEndpoint = async (on: Replica, token: string, url: string) => {
    const res = await request(on.url)
      .post('/v1/webhook-endpoints')
      .set('authorization', `Bearer ${token}`)
      .send({ url, events: ['order.created'] })
      .expect(201);
    return res.body as { id: string; secret: string };
  };
  const placeOrder = async (on: Replica, token: string) => {
    const res = await request(on.url)
      .post('/v1/orders')
      .set({ authorization: `Bearer ${token}`, 'idempotency-key': randomUUID() })
      .send({ items: [{ sku: 'KB-001', qty: 1 }] })
      .expect(201);
    return (res.body as { id: string }).id;
  };
  const about = (orderId: string) => (r: ReceivedWebhook) => r.payload.data.order?.id === orderId;

  beforeAll(async () => {
    pg = await startPostgres();
  });
  afterAll(async () => {
    for (const r of replicas) await r.stop('SIGKILL');
    await Promise.all(receivers.map((r) => r.close()));
    await pg?.destroy();
  });

  test('SIGKILL of the replica delivering while the receiver stalls: after a restart the message arrives', async () => {
    const first = await replica();
    const token = await tokenFrom(first.url);
    const hooks = await receiver();
    const endpoint = await createEndpoint(first, token, hooks.url);
    let release!: () => void;
    hooks.answer({ holdUntil: new Promise<void>((resolve) => (release = resolve)) });
    const orderId = await placeOrder(first, token);
    const [stalled] = await hooks.waitFor((all) => all.some(about(orderId)), 'the first attempt');
    assert.equal(await first.stop('SIGKILL'), null, 'killed mid-delivery');

    const restarted = await replica({}, first.port);
    const got = await hooks.waitFor(
      (all) => all.filter(about(orderId)).length >= 2,
      'the attempt after the restart',
      60_000,
    );
    release();
    const attempts = got.filter(about(orderId));
    assert.equal(attempts.length, 2);
    assert.deepEqual(
      attempts.map((m) => m.id),
      [stalled!.id, stalled!.id],
      'the same webhook-id',
    );
    for (const m of attempts) hooks.verify(m, endpoint.secret);
    await restarted.stop('SIGTERM');
  });

  test('two replicas on one PostgreSQL: each message delivered once per attempt, never twice at once', async () => {
    const a = await replica();
    const b = await replica({ OIDC_ISSUER: `${a.url}/idp` });
    // bob: his orders reach his endpoint only, so every attempt counted below is one this receiver gets.
    const token = await tokenFrom(a.url, 'bob');
    const hooks = await receiver();
    const endpoint = await createEndpoint(a, token, hooks.url);
    const before = (await attemptsCounted(a)) + (await attemptsCounted(b));
    // Slow answers widen the window in which a second claim would overlap. Ten answers are 500: each makes exactly
    // one more attempt, so 30 messages take 40 requests, no more.
    hooks.answer(
      ...Array.from({ length: 10 }, () => ({ delayMs: 50, status: 500 })),
      ...Array.from({ length: 30 }, () => ({ delayMs: 50 })),
    );
    const orders = await Promise.all(Array.from({ length: 30 }, (_, i) => placeOrder(i % 2 ? b : a, token)));
    const got = await hooks.waitFor((all) => all.length >= 40, 'every attempt', 60_000);
    const ours = got.filter((m) => orders.some((id) => about(id)(m)));
    const perOrder = new Map<string, Set<string>>();
    for (const m of ours)
      perOrder.set(m.payload.data.order!.id, (perOrder.get(m.payload.data.order!.id) ?? new Set()).add(m.id));
    for (const id of orders) assert.equal(perOrder.get(id)?.size, 1, `one message (one webhook-id) for ${id}`);
    for (const m of ours) hooks.verify(m, endpoint.secret);
    assert.equal(hooks.maxConcurrentPerId(), 1, 'no message was being delivered twice at once');
    assert.equal(ours.length, got.length);
    // Every request the receiver got is one attempt a replica made and counted (each is counted once its answer is
    // in): no attempt was sent twice.
    const counted = await eventually('every attempt counted', async () => {
      const n = (await attemptsCounted(a)) + (await attemptsCounted(b)) - before;
      return n >= hooks.received.length ? n : undefined;
    });
    assert.equal(counted, hooks.received.length);
    assert.equal(hooks.received.length, 40);
    await a.stop('SIGTERM');
    await b.stop('SIGTERM');
  });

  test('PostgreSQL stopped for 10 s during deliveries: nothing is lost, and delivery resumes without a restart', async () => {
    const only = await replica();
    const token = await tokenFrom(only.url);
    const hooks = await receiver();
    await createEndpoint(only, token, hooks.url);
    hooks.answer(...Array.from({ length: 20 }, () => ({ delayMs: 500 })));
    const before = await Promise.all(Array.from({ length: 12 }, () => placeOrder(only, token)));
    await hooks.waitFor((all) => all.some((m) => before.some((id) => about(id)(m))), 'the first deliveries');
    await pg.stop();
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    await pg.start();
    // The same process, never restarted: new orders are delivered too, and so is every earlier one.
    const after = await Promise.all(
      Array.from({ length: 3 }, async () => {
        for (;;) {
          const res = await request(only.url)
            .post('/v1/orders')
            .set({ authorization: `Bearer ${token}`, 'idempotency-key': randomUUID() })
            .send({ items: [{ sku: 'KB-001', qty: 1 }] });
          if (res.status === 201) return (res.body as { id: string }).id;
          assert.equal(res.status, 503, res.text);
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }),
    );
    await hooks.waitFor(
      (all) => [...before, ...after].every((id) => all.some(about(id))),
      'every order, before and after the outage',
      60_000,
    );
    assert.equal(only.child.exitCode, null, 'the replica was not restarted');
  });
});
