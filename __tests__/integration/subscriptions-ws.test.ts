import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { rest } from '../helpers/openapi.js';
import { startReplicas, startTestServer, stopReplicas, type TestServer } from '../helpers/server.js';
import { subscriber } from '../helpers/subscriber.js';
import { idpSignedToken } from '../helpers/tokens.js';

const UPDATED = `subscription($id: ID) { orderUpdated(id: $id) { id status version customer { name } } }`;
const CREATED = `subscription { orderCreated { id status customer { name } items { sku qty } } }`;

describe('subscriptions over WebSocket (graphql-ws)', () => {
  let a: TestServer;
  let b: TestServer;
  let alice: string;
  let bob: string;
  let carol: string;
  beforeAll(async () => {
    ({ a, b } = await startReplicas());
    ({ alice, bob, carol } = await a.users());
  });
  afterAll(() => stopReplicas({ a, b }));

  const place = async (server: TestServer, token: string) => {
    const res = await rest(server.url, 'POST', '/orders', {
      token,
      body: { items: [{ sku: 'WC-005', qty: 1 }] },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(res.status, 201);
    return { id: res.json<{ id: string }>().id, etag: res.headers.get('etag')! };
  };

  test('an order changed over REST on instance B reaches a subscriber on instance A', async () => {
    const order = await place(a, alice);
    const sub = subscriber(a.url, alice);
    await sub.connected();
    // The subscription is live once the server has registered it with its event bus.
    const listening = a.nextSubscription();
    const stream = sub.subscribe(UPDATED, { id: order.id });
    await listening;
    const patched = await rest(b.url, 'PATCH', `/orders/${order.id}`, {
      token: alice,
      body: { status: 'cancelled' },
      headers: { 'if-match': order.etag },
    });
    assert.equal(patched.status, 200);
    await stream.next(1);
    const [event] = stream.received;
    assert.deepEqual(event!.data, {
      orderUpdated: { id: order.id, status: 'cancelled', version: 2, customer: { name: 'Alice Adams' } },
    });
    assert.match(String(event!.extensions?.eventId), /^[1-9]\d*$/, 'each event carries its outbox id');
    await sub.dispose();
  });

  test("alice receives her events and none of bob's; carol (staff) receives both", async () => {
    const aliceSub = subscriber(a.url, alice);
    const carolSub = subscriber(a.url, carol);
    await Promise.all([aliceSub.connected(), carolSub.connected()]);
    const aliceListening = a.nextSubscription();
    const aliceStream = aliceSub.subscribe(CREATED);
    await aliceListening;
    const carolListening = a.nextSubscription();
    const carolStream = carolSub.subscribe(CREATED);
    await carolListening;
    const bobs = await place(a, bob);
    const alices = await place(b, alice);
    await carolStream.next(2);
    await aliceStream.next(1);
    const ids = (s: typeof aliceStream) =>
      s.received.map((r) => (r.data as { orderCreated: { id: string } }).orderCreated.id);
    assert.deepEqual(new Set(ids(carolStream)), new Set([bobs.id, alices.id]));
    // Alice's own event arrived after bob's was published: had she been sent bob's, it would be here.
    assert.deepEqual(ids(aliceStream), [alices.id]);
    assert.deepEqual(aliceStream.received[0]!.data, {
      orderCreated: {
        id: alices.id,
        status: 'pending',
        customer: { name: 'Alice Adams' },
        items: [{ sku: 'WC-005', qty: 1 }],
      },
    });
    await Promise.all([aliceSub.dispose(), carolSub.dispose()]);
  });

  test("subscribing to someone else's order is NOT_FOUND", async () => {
    const order = await place(a, bob);
    const sub = subscriber(a.url, alice);
    const stream = sub.subscribe(UPDATED, { id: order.id });
    await stream.next(1);
    assert.equal(stream.received[0]!.errors?.[0]?.extensions?.code, 'NOT_FOUND');
    await sub.dispose();
  });

  test('without credentials a subscription is UNAUTHENTICATED', async () => {
    const sub = subscriber(a.url);
    const stream = sub.subscribe(CREATED);
    await stream.next(1);
    assert.equal(stream.received[0]!.errors?.[0]?.extensions?.code, 'UNAUTHENTICATED');
    await sub.dispose();
  });

  test('an invalid token closes the connection with 4403', async () => {
    const sub = subscriber(a.url, `${alice}x`);
    const closed = await sub.closed();
    assert.deepEqual(closed, { code: 4403, reason: 'Forbidden: the access token is not valid' });
  });

  test('an expired token ends the subscription: the socket closes with 4403', async () => {
    const shortLived = await idpSignedToken(a, { sub: 'alice', expiresIn: 2, scope: 'orders:read' });
    const sub = subscriber(a.url, shortLived);
    const stream = sub.subscribe(CREATED);
    const closed = await sub.closed();
    assert.equal(closed.code, 4403);
    assert.equal(closed.reason, 'The access token has expired.');
    assert.deepEqual(stream.received, []);
  });

  test("graphql-ws's own client retries a refused token (4403) with a fresh one, and the subscription delivers", async () => {
    // What a mobile app holds after a night off: an expired token, then one that is no token at all; its
    // connectionParams function hands out the next token on each (re)connect, the last one fresh.
    const tokens = [await idpSignedToken(a, { sub: 'alice', expiresIn: -60 }), 'expired.or.bad', alice];
    const sent: string[] = [];
    const closes: { code: number; reason: string }[] = [];
    const client = createClient({
      url: `${a.url.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      retryAttempts: 3,
      // No backoff timer in a test: each retry starts at once.
      retryWait: async () => undefined,
      connectionParams: async () => {
        sent.push(tokens.shift() ?? alice);
        return { authorization: `Bearer ${sent.at(-1)!}` };
      },
      on: {
        closed: (event) => {
          const { code, reason } = event as { code: number; reason: string };
          closes.push({ code, reason });
        },
      },
    });
    const listening = a.nextSubscription();
    const first = new Promise<{ data?: unknown; error?: unknown }>((resolve) => {
      client.subscribe(
        { query: 'subscription { orderCreated { id } }' },
        {
          next: (result) => resolve({ data: result.data }),
          // The close that made the client give up, as code and reason.
          error: (error) => {
            const { code, reason } = error as { code?: number; reason?: string };
            resolve({ error: { code, reason } });
          },
          complete: () => {},
        },
      );
    });
    // Either the retried connection subscribes, or the client gave up (the outcome says which).
    await Promise.race([listening, first]);
    const order = await place(a, alice);
    assert.deepEqual(await first, { data: { orderCreated: { id: order.id } } });
    assert.deepEqual(closes, [
      { code: 4403, reason: 'Forbidden: the access token is not valid' },
      { code: 4403, reason: 'Forbidden: the access token is not valid' },
    ]);
    assert.deepEqual(sent.length, 3, 'connectionParams ran once per connection');
    await client.dispose();
  });

  test('more than 25 subscriptions on one connection are refused with TOO_MANY_SUBSCRIPTIONS', async () => {
    const sub = subscriber(a.url, carol);
    await sub.connected();
    const streams = Array.from({ length: 26 }, () => sub.subscribe(CREATED));
    await streams[25]!.next(1);
    assert.equal(streams[25]!.received[0]!.errors?.[0]?.extensions?.code, 'TOO_MANY_SUBSCRIPTIONS');
    assert.deepEqual(streams[0]!.received, []);
    await sub.dispose();
  });

  test('a cookie-bearing handshake from another site is refused with 403', async () => {
    const socket = new WebSocket(`${a.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws', {
      headers: { cookie: 'orders_session=abc', origin: 'https://evil.example' },
    });
    const status = await new Promise<number>((resolve) => {
      socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      socket.on('open', () => resolve(101));
      socket.on('error', () => undefined);
    });
    assert.equal(status, 403);
  });

  test('shutdown closes subscribers with 1001 (going away)', async () => {
    // A third instance over the same database, so that shutting it down leaves A and B serving.
    const own = await startTestServer({}, { sameDatabaseAs: a });
    const token = await own.token('alice');
    const sub = subscriber(own.url, token);
    await sub.connected();
    sub.subscribe(CREATED);
    const closing = own.close();
    const closed = await sub.closed();
    await closing;
    assert.equal(closed.code, 1001);
    assert.equal(closed.reason, 'Server shutting down');
  });
});
