import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { createLogger } from '../../src/logger.js';
import { rest } from '../helpers/openapi.js';
import { startReplicas, startTestServer, stopReplicas, type TestServer } from '../helpers/server.js';
import { sseSubscriber, type SseEvent } from '../helpers/sseSubscriber.js';

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
