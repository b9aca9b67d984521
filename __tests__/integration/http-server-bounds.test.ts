import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { eventually } from '../helpers/load.js';
import type { Problem } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

// Small limits, so that each edge costs seconds: every case below runs at once.
const IDLE_S = 2;
const TOTAL_S = 4;
/**
 * How far from a limit the edge cases stay: room for a loaded machine's timers on both sides. The clients run in a
 * process of their own, so the server's work does not delay them; a busy host still delays both processes.
 */
const MARGIN_MS = 900;

let server: TestServer;
let alice: string;
beforeAll(async () => {
  server = await startTestServer({
    BODY_IDLE_TIMEOUT_S: String(IDLE_S),
    REQUEST_TIMEOUT_S: String(TOTAL_S),
    RATE_LIMIT_POINTS: '100000',
  });
  alice = await server.token('alice');
});
afterAll(() => server.close());

/** What came back on a raw connection: the answer, when it began, and whether the whole request had been sent. */
interface Exchange {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** ms from the last byte written to the first byte of the answer. */
  readonly afterLastByteMs: number;
  /** ms from the first byte written to the first byte of the answer. */
  readonly afterFirstByteMs: number;
  readonly sentAll: boolean;
  readonly error?: string;
}

/** Undoes chunked transfer coding, when the answer uses it. */
function dechunk(body: string): string {
  let out = '';
  for (let rest = body; ;) {
    const eol = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, eol), 16);
    if (!(size > 0)) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

type Steps = readonly (readonly [number, string])[];
interface Sent {
  readonly text: string;
  readonly afterLastByteMs: number | null;
  readonly afterFirstByteMs: number | null;
  readonly sentAll: boolean;
  readonly error?: string;
}

/** Exchanges asked for in the same turn of the event loop, sent together by one slow-client process. */
let batch: { steps: Steps; resolve: (sent: Sent) => void; reject: (error: unknown) => void }[] = [];

function runBatch() {
  const exchanges = batch;
  batch = [];
  const child = execFile(
    process.execPath,
    [fileURLToPath(new URL('../helpers/slowClient.mjs', import.meta.url))],
    { maxBuffer: 64 * 1024 * 1024 },
    (error, stdout, stderr) => {
      if (error) return exchanges.forEach((e) => e.reject(new Error(`slow client: ${error.message} ${stderr}`)));
      const results = JSON.parse(stdout) as Sent[];
      exchanges.forEach((e, i) => e.resolve(results[i]!));
    },
  );
  const { port } = new URL(server.url);
  child.stdin!.end(JSON.stringify({ port: Number(port), exchanges: exchanges.map(({ steps }) => ({ steps })) }));
}

/**
 * A client that sends its request in steps, `[delay ms, text]`, on a connection of its own (`Connection: close`), and
 * stops sending once the server answers. `head` is the request line and headers without the final blank line; the
 * Content-Length of the whole body is added unless `head` already frames it. The clients run in a process of their
 * own (helpers/slowClient.mjs): the server's work in this one does not hold up their timers, nor their clock.
 */
async function slowExchange(head: string, steps: Steps): Promise<Exchange> {
  if (!batch.length) setImmediate(runBatch);
  const sent = await new Promise<Sent>((resolve, reject) => batch.push({ steps, resolve, reject }));
  const text = sent.text;
  const split = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...fields] = text.slice(0, split).split('\r\n');
  const headers = Object.fromEntries(
    fields.map((f) => [f.slice(0, f.indexOf(':')).toLowerCase(), f.slice(f.indexOf(':') + 1).trim()]),
  );
  const rawBody = text.slice(split + 4);
  return {
    status: Number(statusLine.split(' ')[1]),
    headers,
    body: headers['transfer-encoding'] === 'chunked' ? dechunk(rawBody) : rawBody,
    afterLastByteMs: sent.afterLastByteMs ?? NaN,
    afterFirstByteMs: sent.afterFirstByteMs ?? NaN,
    sentAll: sent.sentAll,
    ...(sent.error ? { error: sent.error } : {}),
  };
}

/** A request whose body is sent as `[delay, part]` steps after its head. */
function bodyRequest(
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string,
  parts: (body: string) => (readonly [number, string])[],
) {
  const head = [
    `${method} ${path} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    `Content-Length: ${Buffer.byteLength(body)}`,
    '',
    '',
  ].join('\r\n');
  return slowExchange(head, [[0, head], ...parts(body)]);
}

/** The body in two halves with `pauseMs` between them. */
const pausing = (pauseMs: number) => (body: string) =>
  [
    [0, body.slice(0, body.length >> 1)],
    [pauseMs, body.slice(body.length >> 1)],
  ] as const satisfies (readonly [number, string])[];

/** The body in parts, one every `everyMs` (never idle), for `totalMs` at least: bodies are long enough for that. */
const trickling = (totalMs: number, everyMs: number) => (body: string) => {
  const steps = Math.ceil(totalMs / everyMs);
  assert.ok(body.length >= steps, 'a body long enough to trickle');
  const size = Math.floor(body.length / steps);
  return Array.from(
    { length: steps },
    (_, i) => [everyMs, body.slice(i * size, i === steps - 1 ? undefined : (i + 1) * size)] as const,
  );
};

// Padded (JSON allows trailing white space, forms another field) so that each can trickle for seconds.
const PAD = 64;
const json = (value: unknown) => JSON.stringify(value).padEnd(PAD, ' ');
const form = (fields: string) => `${fields}&pad=${'x'.repeat(PAD)}`;
const order = json({ items: [{ sku: 'DL-009', qty: 1 }] });

/**
 * Each route that reads a body, with what makes it read the body, and the answer it gives a body that arrives in time
 * (none for the SSE stream, which stays open). A fresh Idempotency-Key on every call.
 */
const ROUTES = () =>
  ({
    'REST POST /v1/orders': {
      method: 'POST',
      path: '/v1/orders',
      headers: {
        authorization: `Bearer ${alice}`,
        'content-type': 'application/json',
        'idempotency-key': `k-${randomUUID()}`,
      },
      body: order,
      answered: 201,
    },
    'GraphQL POST /graphql': {
      method: 'POST',
      path: '/graphql',
      headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
      body: json({ query: '{ recentOrders(first: 1) { id } }' }),
      answered: 200,
    },
    'SSE POST /graphql/stream': {
      method: 'POST',
      path: '/graphql/stream',
      headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: json({ query: 'subscription { orderChanged { id } }' }),
      answered: undefined,
    },
    'sign-out form POST /auth/logout': {
      method: 'POST',
      path: '/auth/logout',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form('csrf=none'),
      answered: 303,
    },
    "the IdP's sign-in form POST /idp/interaction/:uid/login": {
      method: 'POST',
      path: '/idp/interaction/no-such-interaction/login',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form('username=alice&password=alice'),
      answered: 400,
    },
    "the IdP's token endpoint POST /idp/token": {
      method: 'POST',
      path: '/idp/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form('grant_type=authorization_code&code=nope&client_id=orders-mobile&redirect_uri=x&code_verifier=y'),
      answered: 400,
    },
  }) as const;

/** GraphQL's endpoints answer 408 as GraphQL errors; every other route as problem details. */
function assertTimedOut(
  name: string,
  res: Exchange,
  limit: { idleMs: number } | { totalMs: number },
  path = '/v1/orders',
) {
  assert.equal(res.status, 408, `${name}: ${JSON.stringify(res)}`);
  assert.equal(res.headers.connection, 'close');
  if (path.startsWith('/graphql')) {
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8', name);
    const { errors } = JSON.parse(res.body) as { errors: { message: string; extensions: { code: string } }[] };
    assert.equal(errors.length, 1);
    assert.equal(errors[0]!.extensions.code, 'REQUEST_TIMEOUT', name);
    assert.match(errors[0]!.message, /^The request (body sent nothing for 2 s|took longer than 4 s to arrive)\.$/);
  } else {
    assert.match(res.headers['content-type'] ?? '', /^application\/problem\+json/);
    const problem = JSON.parse(res.body) as Problem;
    assert.equal(problem.status, 408);
    assert.equal(problem.code, 'REQUEST_TIMEOUT');
    assert.equal(problem.type, '/problems/request-timeout');
    // The path as sent, also when the body was cut inside a router that had taken its mount path off req.url.
    assert.equal(problem.instance, path, name);
  }
  assert.equal(res.error, undefined, `${name}: the connection closed cleanly`);
  // Not early. Node arms a timer from the event loop's cached clock, which a busy iteration leaves behind, so the
  // cut may come a little before the limit by the client's clock: never by as much as the margin the cases keep.
  if ('idleMs' in limit) assert.ok(res.afterLastByteMs >= limit.idleMs - MARGIN_MS, `${name} cut too early`);
  else assert.ok(res.afterFirstByteMs >= limit.totalMs - MARGIN_MS, `${name} cut too early`);
}

describe('slow request bodies are cut with 408 (problem details; GraphQL errors on GraphQL) on every route that reads a body', () => {
  test(`a body that stalls longer than BODY_IDLE_TIMEOUT_S or trickles past REQUEST_TIMEOUT_S is cut at the limit; one just within completes; 50 at once are all cut`, async () => {
    const idleMs = IDLE_S * 1000;
    const totalMs = TOTAL_S * 1000;
    const routes = () => Object.entries(ROUTES());
    const cases = {
      // A pause just past the idle limit: answered 408 before the second half is sent, on every route.
      idleOver: routes().map(([name, r]) =>
        bodyRequest(r.method, r.path, r.headers, r.body, pausing(idleMs + MARGIN_MS)).then((res) => ({
          name,
          res,
          path: r.path,
        })),
      ),
      // A pause just within it: the route answers as usual.
      idleUnder: routes()
        .filter(([, r]) => r.answered !== undefined)
        .map(([name, r]) =>
          bodyRequest(r.method, r.path, r.headers, r.body, pausing(idleMs - MARGIN_MS)).then((res) => ({
            name,
            res,
            expected: r.answered!,
          })),
        ),
      // Never idle, but the whole request takes longer than REQUEST_TIMEOUT_S: 408 from the request timeout.
      totalOver: routes().map(([name, r]) =>
        bodyRequest(r.method, r.path, r.headers, r.body, trickling(totalMs + MARGIN_MS, 300)).then((res) => ({
          name,
          res,
          path: r.path,
        })),
      ),
      totalUnder: bodyRequest(
        'POST',
        '/v1/orders',
        ROUTES()['REST POST /v1/orders'].headers,
        order,
        trickling(totalMs - MARGIN_MS * 2, 300),
      ),
      // Headers that trickle in are bounded by the same request timeout.
      headersOver: slowExchange('', [
        ...Array.from(
          { length: 17 },
          (_, i) => [i ? 300 : 0, i ? `X-Slow-${i}: yes\r\n` : 'GET /healthz HTTP/1.1\r\nHost: x\r\n'] as const,
        ),
        [0, '\r\n'],
      ]),
      // Many stalled bodies at once: each one is cut.
      concurrent: Array.from({ length: 50 }, () =>
        bodyRequest('POST', '/v1/orders', ROUTES()['REST POST /v1/orders'].headers, order, pausing(idleMs + MARGIN_MS)),
      ),
    };
    const [idleOver, idleUnder, totalOver, totalUnder, headersOver, concurrent] = await Promise.all([
      Promise.all(cases.idleOver),
      Promise.all(cases.idleUnder),
      Promise.all(cases.totalOver),
      cases.totalUnder,
      cases.headersOver,
      Promise.all(cases.concurrent),
    ]);

    for (const { name, res, path } of idleOver) assertTimedOut(`${name} stalled`, res, { idleMs }, path);
    for (const { name, res, expected } of idleUnder) {
      assert.equal(res.status, expected, `${name} paused within the limit: ${JSON.stringify(res)}`);
      assert.equal(res.sentAll, true);
    }
    for (const { name, res, path } of totalOver) assertTimedOut(`${name} trickled`, res, { totalMs }, path);
    assert.equal(totalUnder.status, 201, JSON.stringify(totalUnder));
    assert.equal(headersOver.status, 408, JSON.stringify(headersOver));
    assert.equal((JSON.parse(headersOver.body) as Problem).code, 'REQUEST_TIMEOUT');
    for (const res of concurrent) assertTimedOut('one of 50 stalled at once', res, { idleMs });

    const late = (xs: Exchange[], limitMs: number) => {
      const offsets = xs.map((x) => x.afterLastByteMs - limitMs);
      return `${Math.min(...offsets).toFixed(0)}…${Math.max(...offsets).toFixed(0)}`;
    };
    console.log(
      `408 after the limit (min…max ms): idle ${late(
        idleOver.map((x) => x.res),
        idleMs,
      )}, ` +
        `50 at once ${late(concurrent, idleMs)}; total: first byte → 408 ` +
        `${Math.max(...totalOver.map((x) => x.res.afterFirstByteMs)).toFixed(0)} ms for a ${totalMs} ms limit`,
    );
  });
});

describe('connections per client address', () => {
  // A server of its own, with the default request timeout: idle sockets are held here for longer than 3 s.
  let capped: TestServer;
  beforeAll(async () => {
    capped = await startTestServer();
  });
  afterAll(() => capped.close());

  /** Opens a connection from `from`, resolving once connected; records what the server sends on it. */
  async function open(from: string) {
    const { port } = new URL(capped.url);
    const socket = connect({ port: Number(port), host: '127.0.0.1', localAddress: from });
    const seen = { text: '', ended: false, error: undefined as string | undefined };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (seen.text += chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => (seen.error = err.code));
    const ended = once(socket, 'end').then(() => (seen.ended = true));
    await once(socket, 'connect');
    return { socket, seen, ended };
  }

  async function get(socket: Socket, seen: { text: string }) {
    seen.text = '';
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await eventually(
      'an answer',
      async () => /\r\n\r\n\{"status":"ok"\}$/.test(seen.text) || /^HTTP\/1\.1 503/.test(seen.text),
      { everyMs: 20 },
    );
    return seen.text.split(' ')[1];
  }

  test('1,000 idle sockets from one address: 256 are held, the rest answered 503 and closed cleanly; other addresses are served, and the same one once its held connections are idle keep-alive ones', async () => {
    const ADDRESS = '127.0.0.3';
    const sockets = await Promise.all(Array.from({ length: 1000 }, () => open(ADDRESS)));
    const refused = await eventually(
      'the refusals',
      async () => {
        const ended = sockets.filter((s) => s.seen.ended);
        return ended.length >= 744 ? ended : undefined;
      },
      { everyMs: 50 },
    );
    assert.equal(refused.length, 744, 'the 257th connection and every later one were refused');
    for (const { seen } of refused) {
      assert.equal(seen.error, undefined, 'refused with an answer and a FIN, not a reset');
      const [head = '', body = ''] = seen.text.split('\r\n\r\n');
      assert.match(head, /^HTTP\/1\.1 503 /);
      assert.match(head, /\r\nContent-Type: application\/problem\+json\r\n/);
      assert.match(head, /\r\nRetry-After: 1\r\n/);
      assert.match(head, /\r\nConnection: close$/);
      const problem = JSON.parse(body) as Problem;
      assert.equal(problem.code, 'TOO_MANY_CONNECTIONS');
      assert.equal(problem.status, 503);
    }
    const held = sockets.filter((s) => !s.seen.ended);
    assert.equal(held.length, 256);
    // The 256 held are served: each answers a request.
    assert.deepEqual(new Set(await Promise.all(held.map((s) => get(s.socket, s.seen)))), new Set(['200']));

    // Another address is not affected.
    await capped.http.get('/healthz').expect(200);
    const other = await open('127.0.0.4');
    assert.equal(await get(other.socket, other.seen), '200');
    other.socket.destroy();
    // The same address is at its cap with 256 idle keep-alive connections: one of those is closed for the new one.
    const again = await open(ADDRESS);
    assert.equal(await get(again.socket, again.seen), '200');
    await eventually('the oldest idle connection to close', async () => held.some((s) => s.seen.ended), {
      everyMs: 10,
    });
    assert.equal(held.filter((s) => s.seen.ended).length, 1);
    again.socket.destroy();
    for (const s of sockets) s.socket.destroy();
  });
});

describe('connections: a trusted proxy is not one client; an idle keep-alive connection never blocks a new one', () => {
  const PER_ADDRESS = 4;
  const PROXY_BUDGET = 8;
  let bounded: TestServer;
  beforeAll(async () => {
    bounded = await startTestServer({
      TRUST_PROXY: '127.0.0.1',
      HTTP_MAX_CONNECTIONS_PER_IP: String(PER_ADDRESS),
      HTTP_MAX_PROXY_CONNECTIONS: String(PROXY_BUDGET),
    });
  });
  afterAll(() => bounded.close());

  async function open(from: string) {
    const { port } = new URL(bounded.url);
    const socket = connect({ port: Number(port), host: '127.0.0.1', localAddress: from });
    const seen = { text: '', ended: false, closed: false };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (seen.text += chunk));
    socket.on('error', () => undefined);
    socket.once('end', () => (seen.ended = true));
    socket.once('close', () => (seen.closed = true));
    await once(socket, 'connect');
    return { socket, seen };
  }
  type Opened = Awaited<ReturnType<typeof open>>;

  /** GET /healthz on an open connection, claiming `forwardedFor`: the status it was answered. */
  async function get({ socket, seen }: Opened, forwardedFor: string) {
    seen.text = '';
    socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: ${forwardedFor}\r\n\r\n`);
    await eventually('an answer', async () => /\r\n\r\n\{"status":"ok"\}$/.test(seen.text) || seen.ended, {
      everyMs: 10,
    });
    return seen.text.split(' ')[1];
  }

  /** 20 connections at once from `from`; once the server has refused all it will, the held and the refused. */
  async function burst(from: string, held: number) {
    const all = await Promise.all(Array.from({ length: 20 }, () => open(from)));
    await eventually('the refusals', async () => all.filter((c) => c.seen.ended).length >= 20 - held, { everyMs: 20 });
    return { held: all.filter((c) => !c.seen.ended), refused: all.filter((c) => c.seen.ended) };
  }

  const problemOf = (text: string) => JSON.parse(text.split('\r\n\r\n')[1]!) as Problem;

  test('an untrusted peer: 4 of 20 concurrent connections held, 16 refused 503, whatever X-Forwarded-For it sends; at the cap its oldest idle keep-alive connection is closed for a new one', async () => {
    const { held, refused } = await burst('127.0.0.7', PER_ADDRESS);
    assert.equal(held.length, PER_ADDRESS);
    assert.equal(refused.length, 20 - PER_ADDRESS);
    for (const { seen } of refused) {
      assert.match(seen.text, /^HTTP\/1\.1 503 /);
      assert.equal(problemOf(seen.text).detail, 'This client address already holds 4 connections to this server.');
    }
    // Each held connection serves a request (spoofing another client earns no place), one after the other, so the
    // first is the one idle longest.
    for (const [i, c] of held.entries()) assert.equal(await get(c, `203.0.113.${i}`), '200');
    const next = await open('127.0.0.7');
    assert.equal(await get(next, '203.0.113.99'), '200');
    await eventually('the oldest idle connection to close', async () => held[0]!.seen.closed, { everyMs: 10 });
    assert.equal(held[0]!.seen.text.endsWith('{"status":"ok"}'), true, 'closed after its answer, not during one');
    assert.deepEqual(
      held.slice(1).map((c) => c.seen.closed),
      [false, false, false],
    );
    for (const c of [...held, ...refused, next]) c.socket.destroy();
  });

  test('the trusted proxy holds HTTP_MAX_PROXY_CONNECTIONS (8 of 20 concurrent), not the per-address 4; past it, 503 naming the budget; an idle one makes room', async () => {
    const { held, refused } = await burst('127.0.0.1', PROXY_BUDGET);
    assert.equal(held.length, PROXY_BUDGET);
    for (const { seen } of refused) {
      assert.equal(problemOf(seen.text).code, 'TOO_MANY_CONNECTIONS');
      assert.equal(problemOf(seen.text).detail, 'The trusted proxies already hold 8 connections to this replica.');
    }
    for (const [i, c] of held.entries()) assert.equal(await get(c, `198.51.100.${i}`), '200');
    const next = await open('127.0.0.1');
    assert.equal(await get(next, '198.51.100.99'), '200');
    await eventually('the oldest idle connection to close', async () => held[0]!.seen.closed, { everyMs: 10 });
    // A direct client is counted on its own address, apart from the proxy.
    const direct = await open('127.0.0.8');
    assert.equal(await get(direct, '198.51.100.1'), '200');
    for (const c of [...held, ...refused, next, direct]) c.socket.destroy();
  });
});
