import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import WebSocket from 'ws';
import { rest } from '../helpers/openapi.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sseSubscriber } from '../helpers/sseSubscriber.js';
import { subscriber } from '../helpers/subscriber.js';

const SKUS = ['KB-001', 'MS-002', 'MN-003', 'HS-004', 'WC-005', 'DK-006', 'CB-007', 'LS-008', 'DL-009'];
/**
 * The largest order there is (100 lines), read 60 times over: about 900 kB a result, so that the kernel's buffers
 * (a few MB) fill within a few events.
 */
const ALIASES = 60;
const LINES = 'sku qty unitPriceCents lineTotalCents product { sku name priceCents }';
const BIG = `subscription { orderCreated { id ${Array.from({ length: ALIASES }, (_, i) => `a${i}: items { ${LINES} }`).join(' ')} } }`;
/** Past this many events the socket must have been cut off: the kernel's buffers hold a few MB, the server 1 MiB. */
const MAX_EVENTS = 60;

type Created = { orderCreated: { id: string } };

/**
 * A graphql-ws subscriber over a real TCP socket whose reading can be stopped: the `ws` client speaking the
 * protocol, with its underlying socket paused, so the server's writes pile up in the kernel and then in the server.
 */
async function throttledSubscriber(url: string, token: string, query: string) {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
  const received: { data?: Created; extensions?: { eventId?: string } }[] = [];
  let acked!: () => void;
  const ack = new Promise<void>((resolve) => (acked = resolve));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  ws.on('message', (raw) => {
    const message = JSON.parse(String(raw)) as { type: string; payload: (typeof received)[number] };
    if (message.type === 'connection_ack') acked();
    if (message.type === 'next') received.push(message.payload);
  });
  await new Promise((resolve) => ws.once('open', resolve));
  ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } }));
  await ack;
  ws.send(JSON.stringify({ id: 'slow', type: 'subscribe', payload: { query } }));
  const socket = (ws as unknown as { _socket: Socket })._socket;
  return { received, closed, pause: () => socket.pause(), resume: () => socket.resume() };
}

describe('a slow subscriber over a real socket', () => {
  let server: TestServer;
  let users: { alice: string; bob: string; carol: string };
  beforeAll(async () => {
    // The document is within the query cost limit, but has more aliases and tokens than the defaults allow, and costs
    // more per event than a subscription may by default. A socket that stops reading also stops answering the
    // keep-alive pings: at the default 12 s a loaded machine could drop it (1006) before its buffer fills, so the
    // pings are an hour apart here and only the buffer decides (subscriptions.test.ts, block stream-limits, checks the keep-alive).
    server = await startTestServer({
      MAX_ALIASES: String(ALIASES),
      MAX_TOKENS: '5000',
      MAX_SUBSCRIPTION_COST: '10000',
      WS_KEEPALIVE_S: '3600',
    });
    users = await server.users();
  });
  afterAll(() => server.close());

  const place = async () => {
    const res = await rest(server.url, 'POST', '/orders', {
      token: users.alice,
      body: { items: Array.from({ length: 100 }, (_, i) => ({ sku: SKUS[i % SKUS.length], qty: 1 })) },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(res.status, 201, res.text);
    return res.json<{ id: string }>().id;
  };

  test('is cut off with 1008 once its buffer is full, while the others receive every event', async () => {
    let listening = server.nextSubscription();
    const slow = await throttledSubscriber(server.url, users.carol, BIG);
    await listening;
    // The same document: the slow one shares its group with carol's and alice's other subscribers.
    const fast = [
      { who: 'carol', client: subscriber(server.url, users.carol) },
      { who: 'alice', client: subscriber(server.url, users.alice) },
    ];
    const subs = [];
    for (const { client } of fast) {
      listening = server.nextSubscription();
      subs.push(client.subscribe(BIG));
      await listening;
    }
    listening = server.nextSubscription();
    const sse = sseSubscriber<Created>(server.url, users.carol, BIG);
    await listening;

    const tooSlow = () => server.counter('graphql_subscribers_too_slow_total');
    const before = await tooSlow();
    slow.pause();
    const placed: string[] = [];
    while (placed.length < MAX_EVENTS && (await tooSlow()) === before) {
      placed.push(await place());
      await Promise.all([...subs.map((s) => s.next(placed.length)), sse.next(placed.length)]);
    }
    assert.equal(await tooSlow(), before + 1, `still not cut off after ${placed.length} events`);

    // Reading again, the slow subscriber finds what was queued before the cut, then the close.
    slow.resume();
    const closed = await slow.closed;
    assert.equal(closed.code, 1008);
    assert.match(closed.reason, /too slow/);
    assert.ok(slow.received.length < placed.length, `${slow.received.length} of ${placed.length} events`);
    assert.deepEqual(
      slow.received.map((r) => r.data!.orderCreated.id),
      placed.slice(0, slow.received.length),
    );

    // The others go on: every event, once, in order, and the next one too.
    placed.push(await place());
    await Promise.all([...subs.map((s) => s.next(placed.length)), sse.next(placed.length)]);
    for (const received of [...subs.map((s) => s.received), sse.received]) {
      assert.deepEqual(
        received.map((r) => (r.data as Created).orderCreated.id),
        placed,
      );
      const ids = received.map((r) => BigInt(r.extensions!.eventId!));
      assert.ok(ids.every((id, i) => i === 0 || id > ids[i - 1]!));
    }
    for (const { client } of fast) client.dispose();
    sse.close();
  });
});
