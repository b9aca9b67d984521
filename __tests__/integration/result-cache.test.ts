import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import pg from 'pg';
import request from 'supertest';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { subscriber } from '../helpers/subscriber.js';

const LIST = `query List($first: Int) { recentOrders(first: $first) { id state totalCents customer { id name } items { sku qty product { name } } } }`;
const MINE = `{ viewer { subject roles scopes customer { id } } recentOrders(first: 100) { id customer { id } } }`;
const PRODUCTS = '{products{sku name priceCents}}';

type Body = {
  data?: Record<string, unknown> | null;
  errors?: { extensions?: { code?: string } }[];
  extensions?: { cost?: { complexity: number; requested: number; remaining: number; resetSeconds: number } };
};

/** The bytes of `data` in a response body as sent, without the per-request `extensions`. */
const dataBytes = (text: string) => {
  const at = text.lastIndexOf(',"extensions":');
  return text.slice(0, at === -1 ? text.length - 1 : at);
};

function post(server: TestServer, query: string, variables?: Record<string, unknown>, token?: string) {
  return request(server.url)
    .post('/graphql')
    .set({
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    })
    .send(JSON.stringify({ query, ...(variables ? { variables } : {}) }));
}

async function createOrder(server: TestServer, token: string): Promise<string> {
  const res = await post(
    server,
    'mutation { createOrder(input: { items: [{ sku: "KB-001", qty: 1 }] }) { id } }',
    undefined,
    token,
  ).expect(200);
  const id = (res.body as { data: { createOrder: { id: string } } }).data.createOrder.id;
  assert.match(id, /^ord_/);
  return id;
}

/**
 * A RESULT_CACHE=on server, for the first block below and as replica A of the two-replica block: each started the same
 * one (startReplicas' A is `startTestServer(env, { replicated: true })`). Both blocks own their orders, and neither reads
 * A's cache metrics as totals: the first compares them before and after within a test, the other reads B's. Replicated,
 * for B: A's 200 ms outbox poll only finds events it has already delivered, so A's cache is flushed as before. Started
 * on first use, closed by the file's last afterAll, as helpers/sharedServer.ts does.
 */
let cacheServer: Promise<TestServer> | undefined;
const resultCacheServer = () => (cacheServer ??= startTestServer({ RESULT_CACHE: 'on' }, { replicated: true }));
afterAll(async () => {
  if (cacheServer) await (await cacheServer).close();
});

const cacheCounters = async (server: TestServer) => ({
  hits: await server.counter('result_cache_hits_total'),
  misses: await server.counter('result_cache_misses_total'),
  entries: await server.counter('result_cache_entries'),
});

describe('result cache (RESULT_CACHE=on)', () => {
  let server: TestServer;
  let alice: string;
  let bob: string;
  let carol: string;
  beforeAll(async () => {
    server = await resultCacheServer();
    ({ alice, bob, carol } = await server.users());
  });

  /** POST as carol through the app itself, counting the SQL this request alone runs. */
  const counted = (query: string, variables: Record<string, unknown>, requestId: string) =>
    server.sqlStatementsOf((agent) =>
      agent
        .post('/graphql')
        .set({
          'content-type': 'application/json',
          accept: 'application/json',
          authorization: `Bearer ${carol}`,
          'x-request-id': requestId,
        })
        .send(JSON.stringify({ query, variables })),
    );

  test('a hit sends the bytes of the miss, runs no SQL, charges the budget and keeps its own headers', async () => {
    await createOrder(server, alice); // the customer and catalogue caches are warm after this
    // A token's first request notes its roles for webhook endpoints (one statement, once per token): not the miss's.
    assert.equal((await server.gql('{ __typename }', undefined, { token: carol })).status, 200);
    const before = await cacheCounters(server);
    const miss = await counted(LIST, { first: 100 }, 'miss-1');
    const hit = await counted(LIST, { first: 100 }, 'hit-1');
    assert.equal(miss.res.status, 200);
    assert.equal(hit.res.status, 200);
    assert.equal(miss.statements, 3, 'a miss runs the orders’, customers’ and items’ statements');
    assert.equal(hit.statements, 0, 'a hit runs none');
    assert.equal(dataBytes(hit.res.text), dataBytes(miss.res.text));
    assert.equal(((miss.res.body as Body).data!.recentOrders as unknown[]).length, 100);
    const [m, h] = [(miss.res.body as Body).extensions!.cost!, (hit.res.body as Body).extensions!.cost!];
    assert.equal(h.complexity, m.complexity);
    assert.equal(h.requested, m.requested);
    assert.equal(h.remaining, m.remaining - m.requested, 'the hit was charged');
    assert.equal(hit.res.headers['x-request-id'], 'hit-1');
    assert.equal(miss.res.headers['x-request-id'], 'miss-1');
    assert.equal(hit.res.headers['content-type'], miss.res.headers['content-type']);
    assert.equal(hit.res.headers['cache-control'], 'no-store');
    assert.equal(miss.res.headers['cache-control'], 'no-store');
    assert.equal(hit.res.headers['vary'], miss.res.headers['vary']);
    assert.match(String(hit.res.headers['ratelimit']), new RegExp(`^"orders";r=${h.remaining};t=\\d+$`));
    assert.equal(hit.res.headers['ratelimit-policy'], miss.res.headers['ratelimit-policy']);
    const after = await cacheCounters(server);
    assert.deepEqual({ hits: after.hits - before.hits, misses: after.misses - before.misses }, { hits: 1, misses: 1 });
  });

  test('GET is cached too; a public response keeps its Cache-Control and sends no rate-limit headers', async () => {
    const url = `/graphql?query=${encodeURIComponent(PRODUCTS)}`;
    const before = await cacheCounters(server);
    const first = await request(server.url).get(url).set('accept', 'application/json').expect(200);
    const second = await request(server.url).get(url).set('accept', 'application/json').expect(200);
    assert.equal(second.text, first.text.replace(/"remaining":\d+/, `"remaining":${remainingOf(second.text)}`));
    assert.equal(dataBytes(second.text), dataBytes(first.text));
    assert.equal(second.headers['cache-control'], 'max-age=300, public');
    assert.equal(first.headers['cache-control'], 'max-age=300, public');
    assert.equal(second.headers['ratelimit'], undefined);
    assert.equal(first.headers['ratelimit'], undefined);
    const after = await cacheCounters(server);
    assert.equal(after.hits - before.hits, 1);
    assert.equal(after.misses - before.misses, 1);
  });

  test('a persisted query sent by hash alone hits the entry its full text stored', async () => {
    const query = '{ products { sku priceCents } }';
    const hash = createHash('sha256').update(query).digest('hex');
    const extensions = JSON.stringify({ persistedQuery: { version: 1, sha256Hash: hash } });
    const before = await cacheCounters(server);
    const full = await request(server.url)
      .get(`/graphql?query=${encodeURIComponent(query)}&extensions=${encodeURIComponent(extensions)}`)
      .expect(200);
    const byHash = await request(server.url)
      .get(`/graphql?extensions=${encodeURIComponent(extensions)}`)
      .expect(200);
    assert.equal(dataBytes(byHash.text), dataBytes(full.text));
    const after = await cacheCounters(server);
    assert.deepEqual({ hits: after.hits - before.hits, misses: after.misses - before.misses }, { hits: 1, misses: 1 });
  });

  test('alice, bob, staff and anonymous callers never get one another’s responses', async () => {
    const ask = async (token?: string) => (await post(server, MINE, undefined, token).expect(200)).body as Body;
    const a1 = await ask(alice);
    const b1 = await ask(bob);
    const c1 = await ask(carol);
    const anon = await ask();
    const a2 = await ask(alice);
    const b2 = await ask(bob);
    assert.equal((a1.data!.viewer as { subject: string }).subject, 'alice');
    assert.equal((b1.data!.viewer as { subject: string }).subject, 'bob');
    assert.equal((c1.data!.viewer as { subject: string }).subject, 'carol');
    assert.deepEqual(a2.data, a1.data);
    assert.deepEqual(b2.data, b1.data);
    const owners = (body: Body) =>
      new Set((body.data!.recentOrders as { customer: { id: string } }[]).map((o) => o.customer.id));
    const aliceId = (a1.data!.viewer as { customer: { id: string } }).customer.id;
    const bobId = (b1.data!.viewer as { customer: { id: string } }).customer.id;
    assert.deepEqual([...owners(a1)], [aliceId]);
    assert.ok(
      [...owners(b1)].every((id) => id === bobId),
      'bob sees his own orders only',
    );
    assert.notEqual(bobId, aliceId);
    assert.ok(owners(c1).size > 1, 'staff see everyone’s');
    // Anonymous: the order field is refused (an error: never stored), and the viewer is null.
    assert.equal(anon.data, null);
    assert.equal(anon.errors?.[0]?.extensions?.code, 'UNAUTHENTICATED');
    const viewer = (await post(server, '{ viewer { subject } }').expect(200)).body as Body;
    assert.deepEqual(viewer.data, { viewer: null });
  });

  test('a token with fewer scopes never gets a response computed with more', async () => {
    const readOnly = (
      await loginWithPkce({
        issuer: server.running.app.issuer,
        username: 'alice',
        password: 'alice',
        scope: 'openid orders:read',
      })
    ).accessToken;
    const noOrders = (
      await loginWithPkce({ issuer: server.running.app.issuer, username: 'alice', password: 'alice', scope: 'openid' })
    ).accessToken;
    const query = '{ viewer { scopes } recentOrders(first: 1) { id } }';
    const full = (await post(server, query, undefined, alice).expect(200)).body as Body;
    assert.deepEqual((full.data!.viewer as { scopes: string[] }).scopes, ['orders:read', 'orders:write']);
    await post(server, query, undefined, alice).expect(200); // now stored for the full-scope token
    const read = (await post(server, query, undefined, readOnly).expect(200)).body as Body;
    assert.deepEqual((read.data!.viewer as { scopes: string[] }).scopes, ['orders:read']);
    const none = (await post(server, query, undefined, noOrders).expect(200)).body as Body;
    assert.equal(none.data, null);
    assert.equal(none.errors?.[0]?.extensions?.code, 'INSUFFICIENT_SCOPE');
  });

  test('a write is seen by the next read on the same replica, by staff and by its customer', async () => {
    const mine = '{ recentOrders(first: 1) { id } }';
    const top = async (token: string) => {
      const res = await post(server, mine, undefined, token).expect(200);
      return ((res.body as Body).data!.recentOrders as { id: string }[])[0]?.id;
    };
    await top(carol);
    await top(alice);
    const hitsBefore = await server.counter('result_cache_hits_total');
    assert.equal(await top(carol), await top(carol)); // stored, and hit
    assert.equal((await server.counter('result_cache_hits_total')) - hitsBefore, 2);
    const id = await createOrder(server, alice);
    assert.equal(await top(carol), id);
    assert.equal(await top(alice), id);
    const cancelled = await post(
      server,
      'mutation($id: ID!) { cancelOrder(id: $id) { id state } }',
      { id },
      alice,
    ).expect(200);
    assert.deepEqual((cancelled.body as Body).data, { cancelOrder: { id, state: 'CANCELLED' } });
    const state = async () =>
      ((await post(server, 'query($id: ID!) { order(id: $id) { state } }', { id }, carol).expect(200)).body as Body)
        .data!.order;
    assert.deepEqual(await state(), { state: 'CANCELLED' });
  });

  test('errors and mutations are never stored', async () => {
    const before = await cacheCounters(server);
    for (let i = 0; i < 2; i++) {
      const res = await post(server, '{ recentOrders(first: -1) { id } }', undefined, carol).expect(200);
      assert.equal((res.body as Body).errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
    }
    await createOrder(server, alice);
    // The same mutation twice at once: two orders, neither answered from the other.
    const [x, y] = await Promise.all([createOrder(server, alice), createOrder(server, alice)]);
    assert.notEqual(x, y);
    const after = await cacheCounters(server);
    assert.equal(after.hits - before.hits, 0);
    assert.equal(after.misses - before.misses, 2, 'the two failed queries were looked up; mutations are not');
    assert.ok(after.entries <= before.entries, 'nothing was added');
  });

  test('the rate budget is spent on hits: a cached query is refused once the budget is gone', async () => {
    const small = await startTestServer({ RESULT_CACHE: 'on', RATE_LIMIT_POINTS: '3' });
    try {
      const statuses: number[] = [];
      const codes: (string | undefined)[] = [];
      for (let i = 0; i < 4; i++) {
        const res = await request(small.url).get(`/graphql?query=${encodeURIComponent(PRODUCTS)}`);
        statuses.push(res.status);
        codes.push((res.body as Body).errors?.[0]?.extensions?.code);
      }
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      assert.deepEqual(codes, [undefined, undefined, undefined, 'RATE_LIMITED']);
      assert.equal(await small.counter('result_cache_hits_total'), 2);
      assert.equal(await small.counter('refusals_total{reason="rate_budget"}'), 1, 'refused once, not twice');
    } finally {
      await small.close();
    }
  });
});

describe('result cache bounds', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ RESULT_CACHE: 'on', RESULT_CACHE_MAX_BYTES: '65536' });
  });
  afterAll(() => server.close());

  test('distinct variables from an anonymous caller cannot grow the cache past its byte bound', async () => {
    // Unknown SKUs: `{ product: null }` without errors, so each one is stored under a key of its own.
    const query = 'query P($sku: String!) { product(sku: $sku) { sku name } }';
    for (let i = 0; i < 60; i++) {
      const res = await post(server, query, { sku: `${i}-${'x'.repeat(1500)}` }).expect(200);
      assert.deepEqual((res.body as Body).data, { product: null });
    }
    const bytes = await server.counter('result_cache_bytes');
    const entries = await server.counter('result_cache_entries');
    assert.ok(bytes <= 65536, `${bytes} bytes held`);
    assert.ok(entries > 0 && entries < 60, `${entries} entries held: older ones were evicted`);
  });

  test('a request whose key would be over 4 KB is executed and never stored', async () => {
    const before = await server.counter('result_cache_misses_total');
    const query = 'query P($sku: String!) { product(sku: $sku) { sku } }';
    const big = { sku: 'y'.repeat(5000) };
    const first = await post(server, query, big).expect(200);
    const second = await post(server, query, big).expect(200);
    assert.deepEqual((first.body as Body).data, { product: null });
    assert.deepEqual((second.body as Body).data, { product: null });
    assert.equal(await server.counter('result_cache_misses_total'), before, 'not even looked up');
    assert.equal(await server.counter('result_cache_hits_total'), 0);
  });
});

describe('RESULT_CACHE=off (the default)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ RESULT_CACHE: 'off' });
  });
  afterAll(() => server.close());

  test('nothing is cached: every read runs its SQL and there are no cache metrics', async () => {
    const carol = await server.token('carol');
    const counted = () =>
      server.sqlStatementsOf((agent) =>
        agent
          .post('/graphql')
          .set({ 'content-type': 'application/json', authorization: `Bearer ${carol}` })
          .send(JSON.stringify({ query: LIST, variables: { first: 5 } })),
      );
    await counted();
    const again = await counted();
    assert.equal(again.res.status, 200);
    assert.equal(again.statements, 3);
    await assert.rejects(server.counter('result_cache_hits_total'), /not found/);
  });
});

describe('result cache across two replicas', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    a = await resultCacheServer();
    b = await startTestServer({ RESULT_CACHE: 'on', OIDC_ISSUER: a.running.app.issuer }, { sameDatabaseAs: a });
  });
  afterAll(() => b?.close());

  test('a write on A is in B’s next read once the bus has brought the event to B', async () => {
    const { alice, carol } = await a.users();
    const top = async (token: string) =>
      (
        ((await post(b, '{ recentOrders(first: 3) { id state } }', undefined, token).expect(200)).body as Body).data!
          .recentOrders as { id: string; state: string }[]
      )[0];
    await top(carol);
    await top(alice);
    const hits = await b.counter('result_cache_hits_total');
    await top(carol);
    assert.equal((await b.counter('result_cache_hits_total')) - hits, 1, 'B holds carol’s list');

    // B's own subscriber sees the event after B's cache listener has run (listeners run in one synchronous pass).
    const sub = subscriber(b.url, carol);
    await sub.connected();
    const listening = Promise.all([b.nextSubscription(), b.nextSubscription()]);
    const created$ = sub.subscribe('subscription { orderCreated { id } }');
    const updated$ = sub.subscribe('subscription { orderUpdated { id state } }');
    await listening;
    const flushes = await b.counter('result_cache_flushes_total');
    const created = await createOrder(a, alice);
    await created$.next(1);
    assert.equal((await b.counter('result_cache_flushes_total')) - flushes, 1);
    assert.deepEqual(await top(carol), { id: created, state: 'PENDING' });
    assert.deepEqual(await top(alice), { id: created, state: 'PENDING' });

    await post(a, 'mutation($id: ID!) { cancelOrder(id: $id) { id } }', { id: created }, alice).expect(200);
    for (let n = 1; ; n++) {
      await updated$.next(n);
      const seen = updated$.received[n - 1]!.data?.orderUpdated as { id: string; state: string } | undefined;
      if (seen?.id === created && seen.state === 'CANCELLED') break;
    }
    assert.deepEqual(await top(carol), { id: created, state: 'CANCELLED' });
    assert.deepEqual(await top(alice), { id: created, state: 'CANCELLED' });
    await sub.client.dispose();
  });
});

/** Resolves once `check` holds, looking again after each short pause (a condition, bounded by the test's timeout). */
async function until(check: () => Promise<boolean>) {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 10));
}

// A read held up in the database while an event arrives needs a second connection to hold it: PostgreSQL only.
(process.env.DATABASE_URL ? describe : describe.skip)('result cache race guard (PostgreSQL)', () => {
  let server: TestServer;
  let locker: pg.Client;
  beforeAll(async () => {
    // The test writes to its outbox as another replica would: it polls as replicas do.
    server = await startTestServer({ RESULT_CACHE: 'on' }, { replicated: true });
    locker = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await locker.connect();
    await locker.query(`set search_path to "${server.schema}"`);
  });
  afterAll(async () => {
    await locker.end();
    await server.close();
  });

  test('a result read before an order event and finished after it is not stored', async () => {
    const carol = await server.token('carol');
    await createOrder(server, await server.token('alice')); // an event row to copy below
    const query = '{ recentOrders(first: 2) { id } }';
    const stale = await server.counter('result_cache_stale_stores_total');
    const flushes = await server.counter('result_cache_flushes_total');
    await locker.query('begin');
    await locker.query('lock table orders in access exclusive mode');
    const reading = post(server, query, undefined, carol).then((res) => res);
    await until(
      async () =>
        (await locker.query(`select 1 from pg_locks where not granted and relation = 'orders'::regclass`)).rowCount! >
        0,
    );
    // An order event from "another replica": a row in the outbox, which this replica's bus picks up by polling.
    await server.running.app.db.query(
      `insert into order_events (kind, order_id, customer_id, payload)
       select kind, order_id, customer_id, payload from order_events where id = (select max(id) from order_events)`,
    );
    await until(async () => (await server.counter('result_cache_flushes_total')) > flushes);
    await locker.query('commit');
    const res = await reading;
    assert.equal(res.status, 200);
    assert.equal(((res.body as Body).data!.recentOrders as unknown[]).length, 2);
    assert.equal((await server.counter('result_cache_stale_stores_total')) - stale, 1);
    const misses = await server.counter('result_cache_misses_total');
    await post(server, query, undefined, carol).expect(200);
    assert.equal((await server.counter('result_cache_misses_total')) - misses, 1, 'the next read executes');
  });

  test('identical queries arriving while one executes wait for it and run no SQL of their own', async () => {
    const carol = await server.token('carol');
    const query = '{ recentOrders(first: 4) { id state } }';
    const before = await cacheCounters(server);
    const coalesced = await server.counter('result_cache_coalesced_total');
    await locker.query('begin');
    await locker.query('lock table orders in access exclusive mode');
    const first = post(server, query, undefined, carol).then((res) => res);
    const waitingOnLock = async () =>
      (await locker.query(`select 1 from pg_locks where not granted and relation = 'orders'::regclass`)).rowCount!;
    await until(async () => (await waitingOnLock()) === 1);
    const others = [post(server, query, undefined, carol), post(server, query, undefined, carol)].map((p) =>
      p.then((res) => res),
    );
    await until(async () => (await server.counter('result_cache_waiting')) === 2);
    assert.equal(await waitingOnLock(), 1, 'only the first reached the database');
    await locker.query('commit');
    const [a, b, c] = [await first, ...(await Promise.all(others))];
    for (const res of [a, b, c]) assert.equal(res!.status, 200);
    assert.equal(dataBytes(b!.text), dataBytes(a!.text));
    assert.equal(dataBytes(c!.text), dataBytes(a!.text));
    const after = await cacheCounters(server);
    assert.deepEqual({ hits: after.hits - before.hits, misses: after.misses - before.misses }, { hits: 2, misses: 1 });
    assert.equal((await server.counter('result_cache_coalesced_total')) - coalesced, 2);
    assert.equal(await server.counter('result_cache_waiting'), 0);
  });
});

function remainingOf(text: string): number {
  return (JSON.parse(text) as Body).extensions!.cost!.remaining;
}
