// Subscriptions over WebSocket and SSE, and their streams' sessions and limits, in one Jest file: a file loads its
// modules into a fresh context and costs about 1.5 s of CPU before its first test (docs/testing.md#how-long-it-takes).
// Each top-level describe block below was a test file of its own, named after it (the comment above it gives the old
// file name), with its tests unchanged. Three blocks share one default replica pair (`replicas` below); every other
// block starts the servers it starts.
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, test } from '@jest/globals';
import { createClient } from 'graphql-ws';
import request from 'supertest';
import WebSocket from 'ws';
import { createLogger } from '../../src/logger.js';
import { eventually } from '../helpers/load.js';
import { rest } from '../helpers/openapi.js';
import { startReplicas, startTestServer, stopReplicas, type TestServer } from '../helpers/server.js';
import { sharedReplicas } from '../helpers/sharedServer.js';
import { type SseEvent, sseSubscriber } from '../helpers/sseSubscriber.js';
import { cookieClient, ORDER_CREATED, rawSocket, sseStream, within } from '../helpers/streams.js';
import { subscriber } from '../helpers/subscriber.js';
import { idpSignedToken } from '../helpers/tokens.js';
import { signIn, WebClient } from '../helpers/webClient.js';

/**
 * The default pair of `subscriptions-ws`, `stream-sessions` and `event-ids-are-numbers`' block on Last-Event-IDs that
 * no event could have. That block uses A alone, its streams and its writes on the one server: a server's own writes
 * reach its listeners without the outbox poll, so a replica's 200 ms poll (a lone server's is 5 s) changes nothing it
 * tests. Each block owns its data (its orders, its sessions) and asserts nothing about the pair as a whole: no counts
 * of everything, no metrics, no log, no budget or per-client limit it comes near. In the file's order they run one
 * after another, so the pair, closed after the last, does not idle through the other blocks.
 */
const replicas = sharedReplicas(3);

// ─── was __tests__/integration/subscriptions-ws.test.ts ───
describe('subscriptions-ws', () => {
  const UPDATED = `subscription($id: ID) { orderUpdated(id: $id) { id status version customer { name } } }`;
  const CREATED = `subscription { orderCreated { id status customer { name } items { sku qty } } }`;

  describe('subscriptions over WebSocket (graphql-ws)', () => {
    let a: TestServer;
    let b: TestServer;
    let alice: string;
    let bob: string;
    let carol: string;
    beforeAll(async () => {
      ({ a, b } = await replicas.start());
      ({ alice, bob, carol } = await a.users());
    });
    afterAll(() => replicas.release());

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
});

// ─── was __tests__/integration/stream-sessions.test.ts ───
describe('stream-sessions', () => {
  const SESSION = 'orders_session';
  /** The promise: every stream a session authenticated ends within 5 s of its end, on every replica. */
  const BOUND_MS = 5_000;

  async function sessionCookie(server: TestServer, user: string): Promise<string> {
    const browser = new WebClient();
    const { response } = await signIn(browser, server.running.publicUrl, user);
    assert.equal(response.status, 303);
    return `${SESSION}=${browser.cookie(server.running.publicUrl, SESSION)!}`;
  }

  /** POST /auth/logout with the cookie and the session's CSRF token, as the home page's form does. */
  async function logout(server: TestServer, cookie: string): Promise<void> {
    const me = await request(server.url).get('/auth/session').set('cookie', cookie).expect(200);
    await request(server.url)
      .post('/auth/logout')
      .set('cookie', cookie)
      .type('form')
      .send({ csrf: (me.body as { csrfToken: string }).csrfToken })
      .expect(303);
  }

  /** A WebSocket holding a subscription and an SSE stream, both opened with the cookie on one replica. */
  async function openStreams(server: TestServer, cookie: string) {
    const ws = cookieClient(server.url, cookie);
    await ws.connected;
    let wsError: unknown;
    ws.client.subscribe(
      { query: 'subscription { orderCreated { id } }' },
      { next: () => undefined, error: (e) => (wsError = e), complete: () => undefined },
    );
    const sse = await sseStream(server.url, { cookie });
    assert.equal(sse.res.status, 200);
    return { ws, sse, wsError: () => wsError };
  }

  describe('streams end with the browser session that opened them', () => {
    let a: TestServer;
    let b: TestServer;
    beforeAll(async () => {
      ({ a, b } = await replicas.start());
    });
    afterAll(() => replicas.release());

    test('logging out on A ends WebSocket (4403) and SSE streams on A and B', async () => {
      const cookie = await sessionCookie(a, 'alice');
      const onA = await openStreams(a, cookie);
      const onB = await openStreams(b, cookie);

      await logout(a, cookie);

      for (const [name, streams] of [
        ['A', onA],
        ['B', onB],
      ] as const) {
        const closed = await within(BOUND_MS, `the WebSocket on ${name} closing`, streams.ws.closed);
        assert.equal(closed.code, 4403, `WebSocket on ${name}`);
        assert.match(closed.reason, /session has ended/);
        const text = await within(BOUND_MS, `the SSE stream on ${name} ending`, streams.sse.text);
        assert.match(
          text,
          /\n?: closed: The session has ended \(signed out, expired or revoked\); sign in again\.\n\n$/,
        );
      }

      // The cookie is dead everywhere: a new handshake with it is refused.
      const again = cookieClient(b.url, cookie);
      const refused = await again.closed;
      assert.equal(refused.code, 4403);
      assert.equal(refused.reason, 'Forbidden: the session has ended; sign in again');
    });

    test('a session whose absolute lifetime ends takes its streams with it on both replicas', async () => {
      const cookie = await sessionCookie(a, 'bob');
      const onA = await openStreams(a, cookie);
      const onB = await openStreams(b, cookie);
      const idHash = createHash('sha256')
        .update(cookie.slice(SESSION.length + 1))
        .digest('base64url');
      // Twelve hours pass in an instant: the session's absolute end is moved to just ahead of now.
      await a.running.app.db.query(
        `update auth_sessions set expires_at = now() + interval '1 second' where id_hash = $1`,
        [idHash],
      );

      for (const streams of [onA, onB]) {
        const closed = await within(BOUND_MS + 1_000, 'the WebSocket closing', streams.ws.closed);
        assert.equal(closed.code, 4403);
        assert.match(
          await within(BOUND_MS, 'the SSE stream ending', streams.sse.text),
          /: closed: The session has ended/,
        );
      }
    });

    test('streams of another session of the same person stay open', async () => {
      const leaving = await sessionCookie(a, 'carol');
      const staying = await sessionCookie(a, 'carol');
      const gone = await openStreams(b, leaving);
      const kept = cookieClient(b.url, staying);
      await kept.connected;
      await logout(a, leaving);
      assert.equal((await within(BOUND_MS, 'the WebSocket closing', gone.ws.closed)).code, 4403);
      await within(BOUND_MS, 'the SSE stream ending', gone.sse.text);
      // The other session's socket still answers queries after the first one's streams have ended.
      const result = await new Promise<unknown>((resolve, reject) =>
        kept.client.subscribe(
          { query: '{ recentOrders(first: 1) { id } }' },
          { next: resolve, error: reject, complete: () => undefined },
        ),
      );
      assert.ok((result as { data?: unknown }).data);
      await kept.client.dispose();
    });
  });
});

// ─── was __tests__/integration/event-ids-are-numbers.test.ts ───
describe('event-ids-are-numbers', () => {
  /** The digit boundaries where text order and numeric order of event ids part ways. */
  const BOUNDARIES = [10, 100, 1000];
  const PER_BOUNDARY = 10;
  /** Ids that straddle `boundary`: five below it, five from it on. */
  const idsAround = (boundary: number) => Array.from({ length: PER_BOUNDARY }, (_, i) => String(boundary - 5 + i));

  /** Makes the next event id `next`; the sequence only moves forward here, so ids stay unique. */
  async function nextEventId(server: TestServer, next: number) {
    await server.running.app.db.query(`select setval(pg_get_serial_sequence('order_events', 'id'), $1)`, [next - 1]);
  }

  async function placeOrder(server: TestServer, token: string): Promise<string> {
    const res = await request(server.url)
      .post('/v1/orders')
      .set('authorization', `Bearer ${token}`)
      .set('idempotency-key', randomUUID())
      .send({ items: [{ sku: 'TB-017', qty: 1 }] })
      .expect(201);
    return (res.body as { id: string }).id;
  }

  /** A graphql-sse subscription to orderCreated resumed after `lastEventId`. */
  const resumeOverSse = (url: string, token: string, lastEventId: string) =>
    sseSubscriber<{ orderCreated?: { id: string } }>(url, token, 'subscription { orderCreated { id } }', {
      lastEventId,
    });

  describe('SSE resume orders events by number, not by their text', () => {
    let server: TestServer;
    let alice: string;
    let carol: string;
    beforeAll(async () => {
      server = await startTestServer();
      ({ alice, carol } = await server.users());
    });
    afterAll(() => server.close());

    for (const boundary of BOUNDARIES) {
      test(`Last-Event-ID just below ${boundary} replays ${boundary - 5}…${boundary + 4} in id order`, async () => {
        await nextEventId(server, boundary - 5);
        const placed: string[] = [];
        for (let i = 0; i < PER_BOUNDARY; i++) placed.push(await placeOrder(server, alice));

        const stream = resumeOverSse(server.url, carol, String(boundary - 6));
        await stream.next(PER_BOUNDARY);
        stream.close();
        assert.deepEqual(
          stream.received.map((e) => e.extensions?.eventId),
          idsAround(boundary),
        );
        assert.deepEqual(
          stream.received.map((e) => e.data?.orderCreated?.id),
          placed,
        );
      });
    }
  });

  /** Reads an SSE body until a `next` event or the end of the stream; returns what it read. */
  async function firstEventOrEnd(body: ReadableStream<Uint8Array>): Promise<string> {
    const decoder = new TextDecoder();
    let text = '';
    for await (const chunk of body) {
      text += decoder.decode(chunk, { stream: true });
      if (/event: next\n/.test(text) && text.endsWith('\n\n')) break;
    }
    return text;
  }

  describe('a Last-Event-ID that no event could have', () => {
    let server: TestServer;
    let alice: string;
    let carol: string;
    beforeAll(async () => {
      server = (await replicas.start()).a;
      ({ alice, carol } = await server.users());
    });
    afterAll(() => replicas.release());

    const stream = (lastEventId: string, signal?: AbortSignal) =>
      fetch(`${server.url}/graphql/stream?query=${encodeURIComponent('subscription { orderCreated { id } }')}`, {
        headers: { authorization: `Bearer ${carol}`, accept: 'text/event-stream', 'last-event-id': lastEventId },
        ...(signal ? { signal } : {}),
      });

    // Past the bigint range, negative, not a number: once ignored (resuming from nothing without a word), now a 400.
    for (const lastEventId of ['9223372036854775808', '9999999999999999999', '-1', 'abc', '1e3', '0x10']) {
      test(`Last-Event-ID ${lastEventId} is refused with 400 BAD_REQUEST`, async () => {
        const res = await stream(lastEventId);
        assert.equal(res.status, 400);
        assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
        assert.deepEqual(JSON.parse(await res.text()), {
          errors: [
            {
              message:
                'Last-Event-ID must be the id of an event this stream sent (a decimal integer up to 9223372036854775807).',
              extensions: { code: 'BAD_REQUEST' },
            },
          ],
        });
      });
    }

    test('an empty Last-Event-ID (what EventSource sends before it has seen an id) is none: live events arrive', async () => {
      const controller = new AbortController();
      // A real streaming client: the SSE body is read as it arrives.
      const res = await stream('', controller.signal);
      // graphql-sse subscribes before it answers, so the headers mean the subscription is live.
      assert.equal(res.status, 200);
      const id = await placeOrder(server, alice);
      const text = await firstEventOrEnd(res.body!);
      controller.abort();
      assert.match(text, new RegExp(`event: next\\n(id: \\d+\\n)?data: .*"orderCreated":\\{"id":"${id}"\\}`));
    });
  });

  describe('a replica without Redis catches up by polling, across digit boundaries', () => {
    let a: TestServer;
    let b: TestServer;
    let alice: string;
    let carol: string;
    beforeAll(async () => {
      // No Redis: the PostgreSQL poll is the only path from A to B, and a short interval keeps the test quick.
      ({ a, b } = await startReplicas({ REDIS_URL: '', EVENT_POLL_MS: '50' }));
      ({ alice, carol } = await a.users());
    });
    afterAll(() => stopReplicas({ a, b }));

    test('B delivers every event A wrote across 9→10, 99→100 and 999→1000, once each, in id order', async () => {
      const sub = subscriber(b.url, carol);
      await sub.connected();
      const events = sub.subscribe('subscription { orderCreated { id } }');
      // A first event proves B's subscription is live, so nothing later can fall before it.
      const sentinel = await placeOrder(a, alice);
      await events.next(1);
      assert.deepEqual(events.received[0]!.data, { orderCreated: { id: sentinel } });

      let expected = 1;
      for (const boundary of BOUNDARIES) {
        await nextEventId(a, boundary - 5);
        // One statement, so B's poll finds the whole batch at once, as after any outage of the live path.
        await a.running.app.db.query(
          `insert into order_events (kind, order_id, customer_id, payload)
         select kind, order_id, customer_id, payload
         from order_events, generate_series(1, $1::int)
         where id = (select min(id) from order_events)`,
          [PER_BOUNDARY],
        );
        // Under text order B would deliver the five ids from the boundary on first and drop the rest.
        await events.next(expected + PER_BOUNDARY / 2);
        const ids = (n: number) => events.received.slice(expected, expected + n).map((e) => e.extensions?.eventId);
        assert.deepEqual(ids(PER_BOUNDARY / 2), idsAround(boundary).slice(0, PER_BOUNDARY / 2), `below ${boundary}`);
        await events.next(expected + PER_BOUNDARY);
        assert.deepEqual(ids(PER_BOUNDARY), idsAround(boundary), `around ${boundary}`);
        expected += PER_BOUNDARY;
      }
      assert.equal(events.received.length, 1 + BOUNDARIES.length * PER_BOUNDARY, 'no duplicates');
      sub.dispose();
    });
  });
});

// ─── was __tests__/integration/subscriptions-sse.test.ts ───
describe('subscriptions-sse', () => {
  type Event = SseEvent<{ orderUpdated?: { id: string; status: string } }>;

  const listen = (url: string, token: string, opts: { singleConnection?: boolean; lastEventId?: string } = {}) =>
    sseSubscriber<Event['data']>(url, token, 'subscription { orderUpdated { id status } }', opts);

  describe('subscriptions over server-sent events (graphql-sse)', () => {
    let a: TestServer;
    let b: TestServer;
    let alice: string;
    let carol: string;
    /** A's log, through the real logger at info; `logged(test)` resolves with the first line that passes it. */
    const logLines: Record<string, unknown>[] = [];
    const watchers = new Set<(entry: Record<string, unknown>) => boolean>();
    const logged = (test: (entry: Record<string, unknown>) => boolean) =>
      new Promise<Record<string, unknown>>((resolve) => {
        const found = logLines.find(test);
        if (found) return resolve(found);
        watchers.add((entry) => (test(entry) ? (resolve(entry), true) : false));
      });
    beforeAll(async () => {
      const logger = createLogger('info', {
        destination: {
          write: (line: string) => {
            const entry = JSON.parse(line) as Record<string, unknown>;
            logLines.push(entry);
            for (const watch of [...watchers]) if (watch(entry)) watchers.delete(watch);
          },
        },
      });
      ({ a, b } = await startReplicas({}, { logger }));
      ({ alice, carol } = await a.users());
    });
    afterAll(() => stopReplicas({ a, b }));

    const place = async () => {
      const res = await rest(a.url, 'POST', '/orders', {
        token: alice,
        body: { items: [{ sku: 'TB-017', qty: 1 }] },
        headers: { 'idempotency-key': randomUUID() },
      });
      return { id: res.json<{ id: string }>().id, etag: res.headers.get('etag')! };
    };
    const setStatus = async (server: TestServer, id: string, status: string) => {
      const res = await rest(server.url, 'PATCH', `/orders/${id}`, {
        token: carol,
        body: { status },
        headers: { 'if-match': '*' },
      });
      assert.equal(res.status, 200, res.text);
    };

    test('after a drop, Last-Event-ID on the other instance replays exactly the missed events, then live ones', async () => {
      const [first, second] = await Promise.all([place(), place()]);
      const listening = a.nextSubscription();
      const before = listen(a.url, alice);
      await listening;
      await setStatus(a, first.id, 'paid');
      await before.next(1);
      const seen = before.received[0]!;
      assert.deepEqual(seen.data, { orderUpdated: { id: first.id, status: 'paid' } });
      assert.match(seen.extensions!.eventId!, /^\d+$/);
      before.close();

      // Three changes while disconnected, made on both instances.
      await setStatus(a, first.id, 'shipped');
      await setStatus(b, second.id, 'paid');
      await setStatus(a, first.id, 'delivered');

      const resumed = listen(b.url, alice, { lastEventId: seen.extensions!.eventId! });
      await resumed.next(3);
      assert.deepEqual(
        resumed.received.map((e) => e.data?.orderUpdated),
        [
          { id: first.id, status: 'shipped' },
          { id: second.id, status: 'paid' },
          { id: first.id, status: 'delivered' },
        ],
      );
      const ids = resumed.received.map((e) => BigInt(e.extensions!.eventId!));
      assert.ok(
        ids.every((id, i) => i === 0 || id > ids[i - 1]!),
        'ids increase',
      );

      await setStatus(a, second.id, 'shipped');
      await resumed.next(4);
      assert.deepEqual(resumed.received[3]!.data, { orderUpdated: { id: second.id, status: 'shipped' } });
      assert.equal(resumed.received.length, 4, 'no duplicates');
      resumed.close();
    });

    test('the single-connection mode delivers events too', async () => {
      const order = await place();
      const listening = a.nextSubscription();
      const stream = listen(a.url, alice, { singleConnection: true });
      await listening;
      await setStatus(a, order.id, 'cancelled');
      await stream.next(1);
      assert.deepEqual(stream.received[0]!.data, { orderUpdated: { id: order.id, status: 'cancelled' } });
      stream.close();
    });

    test('shutdown ends an open single-connection stream, and close() does not wait out the drain timeout', async () => {
      // A third instance over the same database, so that shutting it down leaves A and B serving.
      let drainTimedOut: (entry: Record<string, unknown>) => void = () => undefined;
      const forced = new Promise<Record<string, unknown>>((resolve) => (drainTimedOut = resolve));
      const own = await startTestServer(
        {},
        { sameDatabaseAs: a, onLog: (entry) => /drain timeout/.test(entry.msg) && drainTimedOut(entry) },
      );
      const listening = own.nextSubscription();
      const stream = listen(own.url, await own.token('alice'), { singleConnection: true });
      await Promise.race([listening, stream.ended.then((how) => assert.fail(`the stream ended first: ${how}`))]);
      // A connection that has not sent a byte, as a browser's preconnect (or an HTTP client's pool) leaves one: Node
      // does not count it as idle. The request after it is answered once the server has accepted both.
      const preconnect = connect(Number(new URL(own.url).port), '127.0.0.1');
      const preconnectClosed = once(preconnect, 'close');
      await once(preconnect, 'connect');
      await own.http.get('/healthz').expect(200);

      const outcome = await Promise.race([
        own.close().then(() => 'closed' as const),
        forced.then((entry) => ({ forcedAfterDrainTimeout: entry })),
      ]);
      assert.equal(outcome, 'closed');
      // The client sees its stream end while the subscription is still open: graphql-sse's own client reports it.
      assert.match(await stream.ended, /Connection closed while having active streams/);
      stream.close();
      await preconnectClosed;
    });

    test('a client closing its streams is logged at info, not as an error: 8 at once, distinct and single-connection', async () => {
      const token = await a.token('bob');
      const streams = [];
      for (let i = 0; i < 8; i++) {
        const listening = a.nextSubscription();
        streams.push(listen(a.url, token, { singleConnection: i % 2 === 1 }));
        await listening;
      }
      const before = logLines.length;
      for (const stream of streams) stream.close();
      // Each stream's own request line, however it is logged: distinct streams are POSTs, single-connection ones the
      // GET that holds them.
      const isEnd = (entry: Record<string, unknown>) =>
        logLines.indexOf(entry) >= before &&
        /^\/graphql\/stream/.test(String((entry.req as { url?: string } | undefined)?.url)) &&
        (entry.msg === 'stream closed by the client' || entry.msg === 'request aborted');
      await logged(() => logLines.filter(isEnd).length === 8);
      assert.deepEqual(
        logLines.filter(isEnd).map((entry) => [entry.level, entry.msg]),
        Array(8).fill([30, 'stream closed by the client']),
      );
      assert.deepEqual(
        logLines.slice(before).filter((entry) => Number(entry.level) >= 50),
        [],
      );
    });

    test('an invalid token is refused with 401 before any stream opens', async () => {
      const res = await a.http
        .post('/graphql/stream')
        .set({ 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${alice}x` })
        .send(JSON.stringify({ query: 'subscription { orderCreated { id } }' }));
      assert.equal(res.status, 401);
      assert.match(res.get('www-authenticate') ?? '', /error="invalid_token"/);
    });
  });
});

// ─── was __tests__/integration/subscriptions-shared.test.ts ───
describe('subscriptions-shared', () => {
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
      assert.deepEqual(
        new Set(customerOf(carol!.wsSub.received)),
        new Set(['Alice Adams', 'Bob Brown', 'Carol Clark']),
      );

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
});

// ─── was __tests__/integration/stream-limits.test.ts ───
describe('stream-limits', () => {
  const INVALID = 'subscription { noSuchField }';
  /** Refused before it runs; the code itself is the GraphQL pipeline's business, only the slot is ours. */
  const refusedByValidation = (code: string | undefined) => assert.notEqual(code, 'TOO_MANY_SUBSCRIPTIONS');

  describe('idle WebSockets', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer({ WS_IDLE_TIMEOUT_S: '2', WS_INIT_TIMEOUT_S: '1', WS_KEEPALIVE_S: '1' });
    });
    afterAll(() => server?.close());

    test('a socket that answers no ping is dropped after WS_KEEPALIVE_S, subscription or not; one that answers stays', async () => {
      const token = await server.token('carol');
      const silent = rawSocket(server.url, {}, { autoPong: false });
      const answering = rawSocket(server.url);
      let pings = 0;
      silent.socket.on('ping', () => pings++);
      await Promise.all([
        silent.init({ authorization: `Bearer ${token}` }),
        answering.init({ authorization: `Bearer ${token}` }),
      ]);
      for (const ws of [silent, answering]) ws.send({ id: '1', type: 'subscribe', payload: { query: ORDER_CREATED } });

      // Dropped without a closing handshake, at the second ping (not after the default's 12 to 24 s).
      assert.deepEqual(await within(10_000, 'the drop', silent.closed), { code: 1006, reason: '' });
      assert.ok(pings >= 1, `${pings} pings`);
      // Opened together and as busy, so only its answers kept it.
      assert.equal(answering.socket.readyState, answering.socket.OPEN);
      answering.socket.close();
      await answering.closed;
    });

    test('a socket that never sends connection_init is closed with 4408', async () => {
      const ws = rawSocket(server.url);
      assert.equal(await ws.opened, 101);
      assert.deepEqual(await ws.closed, { code: 4408, reason: 'Connection initialisation timeout' });
    });

    test('an initialised socket holding no subscription closes after WS_IDLE_TIMEOUT_S; one with a subscription stays', async () => {
      const token = await server.token('carol');
      const idle = rawSocket(server.url);
      const busy = rawSocket(server.url);
      await Promise.all([idle.init(), busy.init({ authorization: `Bearer ${token}` })]);
      busy.send({ id: '1', type: 'subscribe', payload: { query: ORDER_CREATED } });

      assert.deepEqual(await idle.closed, { code: 1000, reason: 'Idle timeout' });
      // Opened together, so the busy socket has been open as long: only its subscription kept it.
      assert.equal(busy.socket.readyState, busy.socket.OPEN);
      const query = { id: '2', type: 'subscribe', payload: { query: '{ products { sku } }' } };
      busy.send(query);
      assert.equal((await busy.until((m) => m.id === '2' && m.type === 'complete')).type, 'complete');

      // Once its subscription ends, it is idle like any other.
      busy.send({ id: '1', type: 'complete' });
      assert.deepEqual(await busy.closed, { code: 1000, reason: 'Idle timeout' });
    });
  });

  describe('per-address bound on WebSockets', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer({ WS_MAX_PER_IP: '3' });
    });
    afterAll(() => server?.close());

    test('beyond WS_MAX_PER_IP open sockets from one address the handshake is refused with 429', async () => {
      const open = [rawSocket(server.url), rawSocket(server.url), rawSocket(server.url)];
      assert.deepEqual(await Promise.all(open.map((s) => s.opened)), [101, 101, 101]);
      const refused = rawSocket(server.url);
      assert.equal(await refused.opened, 429);

      open[0]!.socket.close();
      await open[0]!.closed;
      // The server frees the place when it sees the socket close; retry until it has.
      let status = 0;
      for (let attempt = 0; attempt < 250 && status !== 101; attempt++) {
        const next = rawSocket(server.url);
        status = await next.opened;
        if (status !== 101) await new Promise((r) => setTimeout(r, 20));
        else next.socket.close();
      }
      assert.equal(status, 101);
      for (const s of open) s.socket.close();
    });
  });

  describe('per-user stream bounds across WebSocket and SSE', () => {
    let server: TestServer;
    /** One user per test: places a test gives back are freed as the server notices, not before the next test. */
    let tokens: { alice: string; bob: string; carol: string };
    beforeAll(async () => {
      server = await startTestServer({
        STREAMS_MAX_PER_USER: '3',
        WS_MAX_SUBSCRIPTIONS_PER_SOCKET: '2',
        SSE_ANONYMOUS_MAX_PER_IP: '2',
        SSE_RESERVATION_TTL_S: '1',
        TRUST_PROXY: '1',
      });
      tokens = await server.users();
    });
    afterAll(() => server?.close());

    const subscribe = (ws: ReturnType<typeof rawSocket>, id: string, query = ORDER_CREATED) =>
      ws.send({ id, type: 'subscribe', payload: { query } });
    const errorCode = async (ws: ReturnType<typeof rawSocket>, id: string) => {
      const message = await ws.until((m) => m.id === id && m.type === 'error');
      return (message.payload as { extensions?: { code?: string } }[])[0]?.extensions?.code;
    };

    test('subscriptions refused by validation or authorization free their slot on the socket', async () => {
      const ws = rawSocket(server.url);
      await ws.init({ authorization: `Bearer ${tokens.bob}` });
      for (let i = 0; i < 5; i++) {
        subscribe(ws, `bad${i}`, INVALID);
        refusedByValidation(await errorCode(ws, `bad${i}`));
      }
      for (let i = 0; i < 3; i++) {
        subscribe(ws, `nf${i}`, 'subscription { orderUpdated(id: "ord_not_there") { id } }');
        const reply = await ws.until((m) => m.id === `nf${i}` && m.type === 'next');
        assert.equal(
          (reply.payload as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code,
          'NOT_FOUND',
        );
        await ws.until((m) => m.id === `nf${i}` && m.type === 'complete');
      }
      subscribe(ws, 'ok1');
      subscribe(ws, 'ok2');
      subscribe(ws, 'over');
      assert.equal(await errorCode(ws, 'over'), 'TOO_MANY_SUBSCRIPTIONS');
      assert.ok(!ws.messages.some((m) => m.id === 'ok1' || m.id === 'ok2'), 'the two valid ones hold their slots');
      ws.socket.close();
    });

    test('STREAMS_MAX_PER_USER counts WebSocket subscriptions and SSE streams together', async () => {
      const carol = tokens.carol;
      const ws = rawSocket(server.url);
      await ws.init({ authorization: `Bearer ${carol}` });
      subscribe(ws, 'a');
      subscribe(ws, 'b');
      const sse = await sseStream(server.url, { authorization: `Bearer ${carol}` });
      assert.equal(sse.res.status, 200);

      const refused = await request(server.url)
        .post('/graphql/stream')
        .set('authorization', `Bearer ${carol}`)
        .set('accept', 'text/event-stream')
        .send({ query: ORDER_CREATED })
        .expect(429);
      assert.deepEqual(
        refused.body.errors.map((e: { extensions: { code: string } }) => e.extensions.code),
        ['TOO_MANY_SUBSCRIPTIONS'],
      );
      const other = rawSocket(server.url);
      await other.init({ authorization: `Bearer ${carol}` });
      subscribe(other, 'c');
      assert.equal(await errorCode(other, 'c'), 'TOO_MANY_SUBSCRIPTIONS');

      // The SSE stream ends: its place goes to a WebSocket operation (the server notices the disconnect shortly).
      sse.close();
      let answered = false;
      for (let attempt = 0; attempt < 250 && !answered; attempt++) {
        subscribe(other, `probe${attempt}`, '{ products { sku } }');
        const reply = await other.until((m) => m.id === `probe${attempt}` && m.type !== 'complete');
        answered = reply.type === 'next';
        if (!answered) await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(answered, 'a WebSocket operation got the place the SSE stream gave back');
      ws.socket.close();
      other.socket.close();
    });

    test('SSE subscriptions that fail free their place: failures never use up the budget', async () => {
      const alice = tokens.alice;
      for (let i = 0; i < 6; i++) {
        const bad = await sseStream(server.url, { authorization: `Bearer ${alice}` }, INVALID);
        await bad.text;
      }
      const held = await Promise.all([1, 2, 3].map(() => sseStream(server.url, { authorization: `Bearer ${alice}` })));
      assert.deepEqual(
        held.map((s) => s.res.status),
        [200, 200, 200],
      );
      const over = await sseStream(server.url, { authorization: `Bearer ${alice}` });
      assert.equal(over.res.status, 429);
      for (const s of held) s.close();
    });

    const put = (ip: string) =>
      request(server.url).put('/graphql/stream').set('accept', 'text/plain').set('x-forwarded-for', ip);
    const connect = (ip: string, token: string) =>
      // A real streaming client: an SSE response never ends, so nothing may wait for its whole body.
      fetch(`${server.url}/graphql/stream`, {
        headers: { accept: 'text/event-stream', 'x-graphql-event-stream-token': token, 'x-forwarded-for': ip },
      });

    test('anonymous SSE streams are bounded per address (SSE_ANONYMOUS_MAX_PER_IP)', async () => {
      const ip = '192.0.2.1';
      const open = [];
      for (let i = 0; i < 2; i++) open.push(await connect(ip, (await put(ip).expect(201)).text));
      assert.deepEqual(
        open.map((r) => r.status),
        [200, 200],
      );
      const refused = await put(ip).expect(429);
      assert.equal(refused.body.errors[0].extensions.code, 'TOO_MANY_SUBSCRIPTIONS');
      // Another address is not affected.
      await put('192.0.2.2').expect(201);
      for (const r of open) void r.body?.cancel();
    });

    test('a reservation that is never connected holds its place only until SSE_RESERVATION_TTL_S', async () => {
      const ip = '192.0.2.3';
      const first = (await put(ip).expect(201)).text;
      await put(ip).expect(201);
      await put(ip).expect(429);
      // Dropped after a second: the place comes back, and the dropped reservation cannot be connected any more.
      let status = 429;
      for (let attempt = 0; attempt < 100 && status === 429; attempt++) {
        status = (await put(ip)).status;
        if (status === 429) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(status, 201);
      // graphql-sse no longer knows the token, so it reads the GET as a distinct-connections request without a query.
      assert.equal((await connect(ip, first)).status, 400);
    });
  });

  /** The proxy the servers below trust (TRUST_PROXY=127.0.0.1); every other loopback address is a direct client. */
  const PROXY = '127.0.0.1';

  /** A WebSocket from `from`, through the trusted proxy when `from` is PROXY, claiming `forwardedFor`. */
  const socketFrom = (url: string, from: string, forwardedFor: string) =>
    rawSocket(url, { 'x-forwarded-for': forwardedFor }, { localAddress: from });

  describe('per-client stream bounds count the client TRUST_PROXY names: behind the trusted proxy and direct', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer({ TRUST_PROXY: PROXY, WS_MAX_PER_IP: '3', SSE_ANONYMOUS_MAX_PER_IP: '2' });
    });
    afterAll(() => server?.close());

    const statuses = (sockets: ReturnType<typeof rawSocket>[]) => Promise.all(sockets.map((s) => s.opened));

    test('WS_MAX_PER_IP: 3 from one client behind the proxy open, the 4th gets 429, another client behind it opens', async () => {
      const held = [1, 2, 3].map(() => socketFrom(server.url, PROXY, '198.51.100.1'));
      assert.deepEqual(await statuses(held), [101, 101, 101]);
      assert.equal(await socketFrom(server.url, PROXY, '198.51.100.1').opened, 429);
      const other = socketFrom(server.url, PROXY, '198.51.100.2');
      assert.equal(await other.opened, 101);
      for (const s of [...held, other]) s.socket.close();
    });

    test('WS_MAX_PER_IP under 20 concurrent handshakes of one client behind the proxy: exactly 3 open', async () => {
      const all = Array.from({ length: 20 }, () => socketFrom(server.url, PROXY, '198.51.100.3'));
      const codes = await statuses(all);
      assert.equal(codes.filter((c) => c === 101).length, 3);
      assert.equal(codes.filter((c) => c === 429).length, 17);
      for (const s of all) s.socket.close();
    });

    test('a direct client spoofing X-Forwarded-For earns nothing: its own address holds 3 WebSockets, the 4th gets 429', async () => {
      const held = [1, 2, 3].map((n) => socketFrom(server.url, '127.0.0.2', `203.0.113.${n}`));
      assert.deepEqual(await statuses(held), [101, 101, 101]);
      assert.equal(await socketFrom(server.url, '127.0.0.2', '203.0.113.4').opened, 429);
      for (const s of held) s.socket.close();
    });

    /** PUT /graphql/stream (a reservation: an anonymous stream's place) from `from`, claiming `forwardedFor`. */
    const reserve = (from: string, forwardedFor: string) =>
      new Promise<number>((resolve, reject) => {
        const { hostname, port } = new URL(server.url);
        const req = httpRequest(
          {
            host: hostname,
            port,
            method: 'PUT',
            path: '/graphql/stream',
            localAddress: from,
            headers: { accept: 'text/plain', 'x-forwarded-for': forwardedFor, connection: 'close' },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end();
      });

    test('SSE_ANONYMOUS_MAX_PER_IP: 2 per client behind the proxy, the 3rd gets 429; a direct client spoofing X-Forwarded-For gets 2 on its own address', async () => {
      assert.deepEqual(
        [
          await reserve(PROXY, '198.51.100.9'),
          await reserve(PROXY, '198.51.100.9'),
          await reserve(PROXY, '198.51.100.9'),
        ],
        [201, 201, 429],
      );
      assert.equal(await reserve(PROXY, '198.51.100.10'), 201);
      assert.deepEqual(
        [
          await reserve('127.0.0.3', '203.0.113.1'),
          await reserve('127.0.0.3', '203.0.113.2'),
          await reserve('127.0.0.3', '203.0.113.3'),
        ],
        [201, 201, 429],
      );
    });
  });

  describe('the replica-wide stream budget (STREAMS_MAX_PER_REPLICA): past it streams are turned away, requests go on', () => {
    const BUDGET = 8;
    let server: TestServer;
    let alice: string;
    beforeAll(async () => {
      server = await startTestServer({ STREAMS_MAX_PER_REPLICA: String(BUDGET), WS_MAX_PER_IP: '100' });
      ({ alice } = await server.users());
    });
    afterAll(() => server?.close());

    test('20 concurrent WebSockets: 8 are acknowledged, 12 close with 1013; an SSE stream past it gets 503 + Retry-After; a query is answered; a freed place is taken again', async () => {
      const all = Array.from({ length: 20 }, () => rawSocket(server.url));
      await Promise.all(all.map((s) => s.opened));
      const turnedAway = await eventually(
        'the 12 past the budget to be closed',
        async () => {
          const closed = await Promise.all(
            all.map((s) => Promise.race([s.closed, new Promise<undefined>((r) => setImmediate(() => r(undefined)))])),
          );
          const codes = closed.filter((c) => c !== undefined);
          return codes.length >= 20 - BUDGET ? codes : undefined;
        },
        { everyMs: 20 },
      );
      assert.equal(turnedAway.length, 20 - BUDGET);
      for (const closed of turnedAway) {
        assert.deepEqual(closed, { code: 1013, reason: 'This replica holds as many streams as it may; retry.' });
      }
      const held = [];
      for (const s of all) if ((await Promise.race([s.closed, Promise.resolve(undefined)])) === undefined) held.push(s);
      assert.equal(held.length, BUDGET);
      await Promise.all(held.map((s) => s.init({ authorization: `Bearer ${alice}` })));

      const over = await sseStream(server.url, { authorization: `Bearer ${alice}` });
      assert.equal(over.res.status, 503);
      assert.equal(over.res.headers.get('retry-after'), '1');
      const body = JSON.parse(await over.text) as { errors: { extensions: { code: string } }[] };
      assert.equal(body.errors[0]!.extensions.code, 'SERVICE_UNAVAILABLE');
      // Ordinary requests are not streams: they are served.
      await server.http.get('/healthz').expect(200);
      const query = await server.http
        .post('/graphql')
        .set('authorization', `Bearer ${alice}`)
        .send({ query: '{ products { sku } }' });
      assert.equal(query.status, 200);

      // One place freed: an SSE stream takes it (the budget is full again), and the next WebSocket is turned away.
      held[0]!.socket.close();
      const sse = await eventually('the freed place', async () => {
        const next = await sseStream(server.url, { authorization: `Bearer ${alice}` });
        if (next.res.status === 200) return next;
        assert.equal(next.res.status, 503);
        return undefined;
      });
      const late = rawSocket(server.url);
      assert.deepEqual(await late.closed, {
        code: 1013,
        reason: 'This replica holds as many streams as it may; retry.',
      });
      sse.close();
      for (const s of held) s.socket.close();
    });
  });
});
