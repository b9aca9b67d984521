import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { ORDER_CREATED, rawSocket, sseStream, within } from '../helpers/streams.js';

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
