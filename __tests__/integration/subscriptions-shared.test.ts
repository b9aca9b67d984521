import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, test } from '@jest/globals';
import { rest } from '../helpers/openapi.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sseSubscriber } from '../helpers/sseSubscriber.js';
import { subscriber } from '../helpers/subscriber.js';

const SHARED = 'subscription { orderCreated { id totalCents customer { id name } items { sku qty } } }';
/** `Customer.orders` is read with the subscriber's own credential: such a document runs per subscriber. */
const PER_VIEWER = 'subscription { orderCreated { id customer { id orders(first: 3) { id } } } }';

type Created = { orderCreated: { id: string } };

describe('shared execution of subscriptions', () => {
  let server: TestServer;
  let users: { alice: string; bob: string; carol: string };
  // A server per test, so that no subscriber of an earlier test is still counted.
  beforeEach(async () => {
    server = await startTestServer();
    users = await server.users();
  });
  afterEach(() => server.close());

  const place = async (token: string) => {
    const res = await rest(server.url, 'POST', '/orders', {
      token,
      body: { items: [{ sku: 'WC-005', qty: 1 }] },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(res.status, 201, res.text);
    return res.json<{ id: string }>().id;
  };
  const executions = async (sharing: 'shared' | 'own') => {
    try {
      return await server.counter(`graphql_subscription_executions_total{sharing="${sharing}"}`);
    } catch {
      return 0; // not counted yet
    }
  };
  /** One subscriber per user and transport, each registered with the event bus before the next starts. */
  const subscribeAll = async (query: string, who: (keyof typeof users)[]) => {
    const subs = [];
    for (const name of who) {
      let listening = server.nextSubscription();
      const ws = subscriber(server.url, users[name]);
      const wsSub = ws.subscribe(query);
      await listening;
      listening = server.nextSubscription();
      const sse = sseSubscriber<Created>(server.url, users[name], query);
      await listening;
      subs.push({ name, ws, wsSub, sse });
    }
    return subs;
  };

  test('alice, bob and carol on one document over WebSocket and SSE: one execution per audience, no event leaks across audiences', async () => {
    const subs = await subscribeAll(SHARED, ['alice', 'bob', 'carol']);
    const [alice, bob, carol] = subs;
    const shared = await executions('shared');
    const own = await executions('own');

    const aliceFirst = await place(users.alice);
    const bobFirst = await place(users.bob);
    const carolOrder = await place(users.carol);
    // Each customer's last order comes after every other event: anything leaked would have arrived before it.
    const aliceLast = await place(users.alice);
    const bobLast = await place(users.bob);

    await Promise.all(subs.flatMap((s) => [s.wsSub.next(s === carol ? 5 : 2), s.sse.next(s === carol ? 5 : 2)]));
    const idsOf = (received: { data?: unknown }[]) => received.map((r) => (r.data as Created).orderCreated.id);
    const expected = {
      alice: [aliceFirst, aliceLast],
      bob: [bobFirst, bobLast],
      carol: [aliceFirst, bobFirst, carolOrder, aliceLast, bobLast],
    };
    for (const s of subs) {
      assert.deepEqual(idsOf(s.wsSub.received), expected[s.name], `${s.name} over WebSocket`);
      assert.deepEqual(idsOf(s.sse.received), expected[s.name], `${s.name} over SSE`);
      // The same result on both transports, event id included.
      assert.deepEqual(
        s.wsSub.received.map((r) => [r.data, r.extensions?.eventId]),
        s.sse.received.map((r) => [r.data, r.extensions?.eventId]),
      );
      for (const r of [...s.wsSub.received, ...s.sse.received]) {
        assert.match(r.extensions!.eventId!, /^\d+$/);
        assert.equal(r.errors, undefined);
      }
    }
    const customerOf = (received: { data?: unknown }[]) =>
      received.map((r) => (r.data as { orderCreated: { customer: { name: string } } }).orderCreated.customer.name);
    assert.deepEqual(new Set(customerOf(alice!.wsSub.received)), new Set(['Alice Adams']));
    assert.deepEqual(new Set(customerOf(bob!.sse.received)), new Set(['Bob Brown']));
    assert.deepEqual(new Set(customerOf(carol!.wsSub.received)), new Set(['Alice Adams', 'Bob Brown', 'Carol Clark']));

    // 18 deliveries, 9 executions: staff (carol's two sockets) for every event, plus the ordering customer's
    // audience (their two sockets) for theirs; carol's own order has no customer audience listening.
    assert.equal((await executions('shared')) - shared, 9);
    assert.equal((await executions('own')) - own, 0);
    for (const s of subs) {
      s.ws.dispose();
      s.sse.close();
    }
  });

  test('a document selecting Customer.orders is executed per subscriber, with the same visibility', async () => {
    const subs = await subscribeAll(PER_VIEWER, ['alice', 'bob', 'carol']);
    const [alice, bob, carol] = subs;
    const shared = await executions('shared');
    const own = await executions('own');

    const bobFirst = await place(users.bob);
    const aliceOrder = await place(users.alice);
    // Bob's last order comes after alice's: had hers leaked to him, it would have arrived before it.
    const bobLast = await place(users.bob);
    await Promise.all(
      subs.flatMap((s) => [
        s.wsSub.next(s === carol ? 3 : s === bob ? 2 : 1),
        s.sse.next(s === carol ? 3 : s === bob ? 2 : 1),
      ]),
    );

    type PerViewer = { orderCreated: { id: string; customer: { orders: { id: string }[] } } };
    const ids = (received: { data?: unknown }[]) => received.map((r) => (r.data as PerViewer).orderCreated.id);
    for (const s of [alice!, bob!, carol!]) {
      const want = s === carol ? [bobFirst, aliceOrder, bobLast] : s === alice ? [aliceOrder] : [bobFirst, bobLast];
      assert.deepEqual(ids(s.wsSub.received), want, `${s.name} over WebSocket`);
      assert.deepEqual(ids(s.sse.received), want, `${s.name} over SSE`);
    }
    const aliceView = (alice!.wsSub.received[0]!.data as PerViewer).orderCreated.customer.orders.map((o) => o.id);
    assert.equal(aliceView[0], aliceOrder);
    // 12 deliveries, each its own execution.
    assert.equal((await executions('own')) - own, 12);
    assert.equal((await executions('shared')) - shared, 0);
    for (const s of subs) {
      s.ws.dispose();
      s.sse.close();
    }
  });
});
