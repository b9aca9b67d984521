import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import pg from 'pg';
import request from 'supertest';
import { eventually } from '../helpers/load.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const SWEEP_LOCK = 7251006;

describe('expired rows are swept', () => {
  let server: TestServer;
  let alice: string;
  beforeAll(async () => {
    server = await startTestServer();
    alice = await server.token('alice');
  });
  afterAll(() => server?.close());

  const db = () => server.running.app.db;
  const createOrder = async (key: string) =>
    request(server.url)
      .post('/v1/orders')
      .set('authorization', `Bearer ${alice}`)
      .set('idempotency-key', key)
      .send({ items: [{ sku: 'DL-009', qty: 1 }] })
      .expect(201);
  const keys = async (...wanted: string[]) =>
    (
      await db().query<{ key: string }>(
        'select key from idempotency_keys where key in (select jsonb_array_elements_text($1::jsonb)) order by key',
        [JSON.stringify(wanted)],
      )
    ).map((r) => r.key);

  test('an idempotency key older than 24 hours is gone after a sweep; a fresh one stays', async () => {
    const [stale, fresh] = [`stale-${randomUUID()}`, `fresh-${randomUUID()}`];
    await createOrder(stale);
    await createOrder(fresh);
    await db().query(`update idempotency_keys set created_at = now() - interval '25 hours' where key = $1`, [stale]);

    assert.equal(await server.running.app.sweeper.runOnce(), true);
    assert.deepEqual(await keys(stale, fresh), [fresh]);
  });

  test('expired sessions, sign-ins and day-old order events go too; live ones stay', async () => {
    await request(server.running.publicUrl).get('/auth/login').expect(302);
    await request(server.running.publicUrl).get('/auth/login').expect(302);
    const before = (await db().query<{ id_hash: string }>('select id_hash from auth_login_attempts')).map(
      (r) => r.id_hash,
    );
    const expiring = { id_hash: before[0]! };
    await db().query(`update auth_login_attempts set expires_at = now() - interval '1 second' where id_hash = $1`, [
      expiring.id_hash,
    ]);
    const sessions = ['s-live', 's-expired', 's-revoked'];
    for (const id of sessions) {
      await db().query(
        `insert into auth_sessions (id_hash, subject, expires_at, revoked_at)
         values ($1, 'alice', now() + make_interval(secs => $2), case when $1 = 's-revoked' then now() end)`,
        [id, id === 's-expired' ? -1 : 3600],
      );
    }
    const [old] = await db().query<{ id: string }>(
      `insert into order_events (kind, order_id, customer_id, payload, created_at)
       values ('created', 'ord_old', 'cus_old', '{}', now() - interval '25 hours') returning id::text as id`,
    );
    // An event is kept until webhooks have turned it into messages (this one, unreadable, is passed over).
    await eventually('the webhook outbox cursor to pass the old event', async () => {
      const [cursor] = await db().query<{ last: string }>(
        'select last_event_id::text as last from webhook_outbox_cursor',
      );
      return BigInt(cursor!.last) >= BigInt(old!.id) || undefined;
    });

    assert.equal(await server.running.app.sweeper.runOnce(), true);

    const left = await db().query<{ id_hash: string }>(
      `select id_hash from auth_sessions where id_hash in ('s-live', 's-expired', 's-revoked')`,
    );
    assert.deepEqual(
      left.map((r) => r.id_hash),
      ['s-live'],
    );
    const attempts = await db().query<{ id_hash: string }>('select id_hash from auth_login_attempts');
    // The expired sign-in is gone; every live one (the second sign-in at least) stays.
    assert.deepEqual(attempts.map((a) => a.id_hash).sort(), before.slice(1).sort());
    assert.ok(before.length >= 2);
    assert.deepEqual(await db().query('select id from order_events where id = $1', [old!.id]), []);
  });

  // PostgreSQL only: embedded PGlite has one session, so nothing can hold the lock beside the app's own.
  (process.env.DATABASE_URL ? test : test.skip)(
    'while another replica holds the sweep lock, a sweep stands aside (PostgreSQL)',
    async () => {
      // Another replica, as PostgreSQL sees it: a session of its own holding the lock.
      const other = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await other.connect();
      try {
        await other.query('select pg_advisory_lock($1)', [SWEEP_LOCK]);
        assert.equal(await server.running.app.sweeper.runOnce(), false);
        await other.query('select pg_advisory_unlock($1)', [SWEEP_LOCK]);
        assert.equal(await server.running.app.sweeper.runOnce(), true);
      } finally {
        await other.end();
      }
    },
  );

  // Embedded PGlite only: its one session runs one transaction at a time, so two replicas over it take turns.
  (process.env.DATABASE_URL ? test.skip : test)(
    'two replicas over the embedded database sweep one after the other: both sweeps complete (PGlite)',
    async () => {
      const replica = await startTestServer({}, { sameDatabaseAs: server });
      try {
        const results = await Promise.all([
          server.running.app.sweeper.runOnce(),
          replica.running.app.sweeper.runOnce(),
        ]);
        assert.deepEqual(results, [true, true]);
      } finally {
        await replica.close();
      }
    },
  );

  test('shutdown stops the sweeper and waits for a sweep in progress', async () => {
    const own = await startTestServer({ SWEEP_INTERVAL_S: '1' });
    const sweeping = own.running.app.sweeper.runOnce();
    await own.close();
    assert.equal(await sweeping, true);
  });
});
