import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import pg from 'pg';
import request from 'supertest';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { startPostgres, type PostgresCluster } from '../helpers/infra.js';
import { eventually, startLoad, type Send } from '../helpers/load.js';
import { startReplica, type Replica } from '../helpers/replica.js';

const ITEMS = [{ sku: 'DL-009', qty: 2 }];

let cluster: PostgresCluster;
let db: pg.Client;
beforeAll(async () => {
  cluster = await startPostgres();
  db = new pg.Client({ connectionString: cluster.url });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await cluster?.destroy();
});

async function aliceToken(replica: Replica) {
  const { accessToken } = await loginWithPkce({ issuer: `${replica.url}/idp`, username: 'alice', password: 'alice' });
  return `Bearer ${accessToken}`;
}

const createOrder = (url: string, auth: string, key: string) =>
  request(url).post('/v1/orders').set('authorization', auth).set('idempotency-key', key).send({ items: ITEMS });

describe('SIGKILL during 50 concurrent keyed POSTs', () => {
  let replica: Replica;
  afterAll(() => replica?.stop('SIGKILL'));

  test('every 201 the client saw is stored once, nothing is half-written, and retries complete exactly once', async () => {
    replica = await startReplica({ DATABASE_URL: cluster.url });
    const auth = await aliceToken(replica);
    const [{ n: before }] = (await db.query('select count(*)::int as n from orders')).rows as [{ n: number }];
    const keys = Array.from({ length: 50 }, () => randomUUID());
    let killed: Promise<number | null> | undefined;
    const seen = await Promise.all(
      keys.map((key) =>
        createOrder(replica.url, auth, key).then(
          (res) => {
            // The first answer proves the batch is being processed: the rest are in flight now.
            killed ??= replica.stop('SIGKILL');
            return { key, status: res.status, id: (res.body as { id?: string }).id };
          },
          (err: unknown) => ({ key, status: 'error' as const, error: String(err), id: undefined }),
        ),
      ),
    );
    assert.equal(await killed, null, 'the replica was killed by the signal');
    const ok = seen.filter((s) => s.status === 201);
    assert.ok(ok.length >= 1 && ok.length < 50, `${ok.length} of 50 got their 201 before the kill`);

    const stored = await db.query<{ id: string; key: string }>(
      `select o.id, k.key from orders o left join idempotency_keys k on k.order_id = o.id
       where k.key = any($1) or o.id = any($2)`,
      [keys, ok.map((s) => s.id)],
    );
    for (const s of ok) {
      assert.deepEqual(
        stored.rows.filter((r) => r.id === s.id),
        [{ id: s.id, key: s.key }],
        'a 201 is in the database once, under its key',
      );
    }
    const { rows: orphans } = await db.query(
      `select 'order without items' as what, id from orders o
         where not exists (select 1 from order_items i where i.order_id = o.id)
       union all
       select 'key without order', k.key from idempotency_keys k
         where not exists (select 1 from orders o where o.id = k.order_id)`,
    );
    assert.deepEqual(orphans, []);

    replica = await startReplica({ DATABASE_URL: cluster.url }, { port: replica.port });
    const retried = await Promise.all(keys.map((key) => createOrder(replica.url, auth, key).expect(201)));
    for (const s of ok) {
      const again = retried[keys.indexOf(s.key)]!;
      assert.equal((again.body as { id: string }).id, s.id, 'a retried key replays the order it created');
    }
    const [{ n: afterwards }] = (await db.query('select count(*)::int as n from orders')).rows as [{ n: number }];
    assert.equal(afterwards - before, 50, 'exactly one order per key');
  });
});

describe('SIGTERM under load', () => {
  test('reports not-ready for DRAIN_DELAY_S while serving, then drains: no request fails', async () => {
    // Long enough for a loaded machine to see /readyz turn 503 and send one more request inside the delay.
    const replica = await startReplica({ DATABASE_URL: cluster.url, DRAIN_DELAY_S: '5' });
    const auth = await aliceToken(replica);
    const { body: order } = await createOrder(replica.url, auth, randomUUID()).expect(201);
    // The test plays the balancer: it stops sending new requests once /readyz says 503.
    let ready = true;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const res = await request(replica.url)
          .get('/readyz')
          .ok(() => true)
          .catch(() => null);
        if (res?.status === 503) ready = false;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const send: Send = async (n) => {
      const res =
        n % 3 === 0
          ? await createOrder(replica.url, auth, randomUUID()).ok(() => true)
          : await request(replica.url)
              .get(`/v1/orders/${(order as { id: string }).id}`)
              .set('authorization', auth)
              .ok(() => true);
      return { name: n % 3 === 0 ? 'create' : 'read', status: res.status };
    };
    const load = startLoad({ rate: 50, maxRequests: 3_000, send, paused: () => !ready });
    await eventually('the load to be answered', async () => load.outcomes.length >= 50);

    replica.child.kill('SIGTERM');
    await replica.waitForLog((e) => e.msg === 'not ready; waiting for the balancer to stop sending', { seen: true });
    await eventually('the balancer to see /readyz 503', async () => !ready);
    // Taken out of rotation, but still serving what reaches it.
    await request(replica.url)
      .get(`/v1/orders/${(order as { id: string }).id}`)
      .set('authorization', auth)
      .expect(200);
    assert.equal(await replica.stop(), 0);
    watching = false;
    await watcher;
    const outcomes = await load.done();

    assert.ok(outcomes.length >= 50);
    assert.deepEqual(
      outcomes.filter((o) => o.status !== 200 && o.status !== 201),
      [],
      'every request sent got its answer',
    );
    const msgs = replica.logs().map((e) => e.msg);
    assert.ok(msgs.indexOf('not ready; waiting for the balancer to stop sending') < msgs.indexOf('stopped'));
  });
});
