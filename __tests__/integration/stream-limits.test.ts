import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { eventually } from '../helpers/load.js';
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
    assert.deepEqual(await late.closed, { code: 1013, reason: 'This replica holds as many streams as it may; retry.' });
    sse.close();
    for (const s of held) s.socket.close();
  });
});
