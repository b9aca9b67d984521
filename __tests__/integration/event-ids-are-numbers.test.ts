import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startReplicas, startTestServer, stopReplicas, type TestServer } from '../helpers/server.js';
import { sseSubscriber } from '../helpers/sseSubscriber.js';
import { subscriber } from '../helpers/subscriber.js';

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
  sseSubscriber<{ orderCreated?: { id: string } }>(url, token, 'subscription { orderCreated { id } }', { lastEventId });

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
    server = await startTestServer();
    ({ alice, carol } = await server.users());
  });
  afterAll(() => server.close());

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
