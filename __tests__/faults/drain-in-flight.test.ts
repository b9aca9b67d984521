import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { startPostgres, startRedis, type PostgresCluster, type RedisServer } from '../helpers/infra.js';
import { startReplica, type Replica } from '../helpers/replica.js';
import { testDataDir } from '../helpers/testRun.js';

const BODY = JSON.stringify({ items: [{ sku: 'DL-009', qty: 1 }] });

/** What the client saw for one keyed POST: an answer, or the transport error that replaced it. */
interface Seen {
  readonly key: string;
  readonly keepAlive: boolean;
  readonly status?: number;
  readonly connection?: string | undefined;
  readonly retryAfter?: string | undefined;
  readonly id?: string;
  readonly error?: string;
}

/**
 * One keyed POST /v1/orders through node:http, so that the test decides the connection: a kept-alive socket of
 * `agent` that has already carried a request, or a connection of its own that says `Connection: close`. `written`
 * resolves once the whole request has been handed to the socket.
 */
function keyedPost(url: string, auth: string, key: string, agent: Agent | false) {
  const keepAlive = agent !== false;
  let written!: () => void;
  const flushed = new Promise<void>((resolve) => (written = resolve));
  const seen = new Promise<Seen>((resolve) => {
    const req = httpRequest(`${url}/v1/orders`, {
      method: 'POST',
      agent,
      headers: {
        authorization: auth,
        'idempotency-key': key,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(BODY),
        ...(keepAlive ? {} : { connection: 'close' }),
      },
    });
    req.on('finish', written);
    req.on('error', (err: NodeJS.ErrnoException) => {
      written();
      resolve({ key, keepAlive, error: err.code ?? err.message });
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('error', (err: NodeJS.ErrnoException) => resolve({ key, keepAlive, error: err.code ?? err.message }));
      res.on('end', () =>
        resolve({
          key,
          keepAlive,
          status: res.statusCode!,
          connection: res.headers.connection,
          retryAfter: res.headers['retry-after'],
          ...(res.statusCode === 201 ? { id: (JSON.parse(text) as { id: string }).id } : {}),
        }),
      );
    });
    req.end(BODY);
  });
  return { flushed, seen };
}

/** Every order alice can list, by id: her orders are this file's alone. */
async function aliceOrders(url: string, auth: string): Promise<Set<string>> {
  const ids = new Set<string>();
  let path: string | null = '/v1/orders?limit=100';
  while (path) {
    const res = await request(url).get(path).set('authorization', auth).expect(200);
    const page = res.body as { orders: { id: string }[]; next_cursor: string | null };
    for (const o of page.orders) ids.add(o.id);
    path = page.next_cursor ? `/v1/orders?limit=100&cursor=${page.next_cursor}` : null;
  }
  return ids;
}

/**
 * A rolling restart as a balancer (or a client on keep-alive) sees it: `inFlight` keyed POSTs are written — half on
 * connections kept alive from earlier requests, half on connections of their own — and only then is SIGTERM sent.
 * Every one of them reached the socket before the signal, so every one is served: 201, none refused or reset. Then,
 * on the restarted replica, every key is retried: each replays the order it created, and each key has one order.
 */
async function sigtermWithInFlight(replica: Replica, inFlight: number, restart: () => Promise<Replica>) {
  const { accessToken } = await loginWithPkce({ issuer: `${replica.url}/idp`, username: 'alice', password: 'alice' });
  const auth = `Bearer ${accessToken}`;
  const before = await aliceOrders(replica.url, auth);
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  // Kept-alive connections, more than the POSTs will reuse: the rest are idle when the drain starts.
  const warm = inFlight / 2 + 10;
  await Promise.all(
    Array.from({ length: warm }, () =>
      request(replica.url)
        .get('/healthz')
        .agent(agent as never)
        .expect(200),
    ),
  );
  assert.ok(Object.values(agent.freeSockets).flat().length >= inFlight / 2, 'the agent holds idle kept-alive sockets');

  const keys = Array.from({ length: inFlight }, () => randomUUID());
  const posts = keys.map((key, i) => keyedPost(replica.url, auth, key, i % 2 === 0 ? agent : false));
  await Promise.all(posts.map((p) => p.flushed));
  const exit = replica.stop('SIGTERM');
  const seen = await Promise.all(posts.map((p) => p.seen));
  const code = await exit;
  agent.destroy();
  // Restarted before anything is asserted, so that a failure here leaves the next test a replica.
  const next = await restart();
  assert.equal(code, 0, 'the replica drained and exited 0');

  const failed = seen.filter((s) => s.error !== undefined);
  const created = seen.filter((s) => s.status === 201);
  const summary = {
    inFlight,
    created: created.length,
    resets: failed.length,
    resetsKeptAlive: failed.filter((s) => s.keepAlive).length,
    errors: [...new Set(failed.map((s) => s.error))],
  };
  console.log(`SIGTERM with ${inFlight} keyed POSTs in flight: ${JSON.stringify(summary)}`);
  assert.deepEqual(failed, [], 'no request that reached the socket saw a reset or a dropped connection');
  assert.deepEqual(
    seen.filter((s) => s.status !== 201),
    [],
    'every request that reached the socket before the signal was served',
  );
  for (const s of seen.filter((s) => !s.keepAlive)) assert.equal(s.connection, 'close');

  const retried = await Promise.all(
    keys.map((key) => keyedPost(next.url, auth, key, false).seen.then((s) => ({ ...s, key }))),
  );
  for (const r of retried) assert.equal(r.status, 201, `the retry of ${r.key} is created or replayed`);
  for (const s of created) {
    assert.equal(retried.find((r) => r.key === s.key)!.id, s.id, 'a 201 was stored: its key replays that order');
  }
  const after = await aliceOrders(next.url, auth);
  const added = [...after].filter((id) => !before.has(id));
  assert.deepEqual(
    added.sort(),
    [...new Set(retried.map((r) => r.id!))].sort(),
    'exactly one order per key, no other order',
  );
  assert.equal(added.length, inFlight);
  return next;
}

/**
 * Uploads in the middle of their bodies when SIGTERM comes: each keyed POST has sent its headers and half its body on
 * a connection of its own. Once the replica says its listener is closed, a new connection is refused; then the
 * bodies end, and every upload is served (201, Connection: close). Each key has exactly one order afterwards.
 */
async function sigtermWithUploads(replica: Replica, uploads: number, restart: () => Promise<Replica>) {
  const { accessToken } = await loginWithPkce({ issuer: `${replica.url}/idp`, username: 'alice', password: 'alice' });
  const auth = `Bearer ${accessToken}`;
  const keys = Array.from({ length: uploads }, () => randomUUID());
  const half = Math.floor(BODY.length / 2);
  const started = keys.map((key) => {
    const req = httpRequest(`${replica.url}/v1/orders`, {
      method: 'POST',
      agent: false,
      headers: {
        authorization: auth,
        'idempotency-key': key,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(BODY),
      },
    });
    const seen = new Promise<Seen>((resolve) => {
      req.on('error', (err: NodeJS.ErrnoException) =>
        resolve({ key, keepAlive: true, error: err.code ?? err.message }),
      );
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({
            key,
            keepAlive: true,
            status: res.statusCode!,
            connection: res.headers.connection,
            ...(res.statusCode === 201 ? { id: (JSON.parse(text) as { id: string }).id } : {}),
          }),
        );
      });
    });
    const headersSent = new Promise<void>((resolve) => req.write(BODY.slice(0, half), () => resolve()));
    return { req, seen, headersSent };
  });
  await Promise.all(started.map((u) => u.headersSent));
  const closed = replica.waitForLog((e) => e.msg === LISTENER_CLOSED);
  const exit = replica.stop('SIGTERM');
  await closed;
  const fresh = await new Promise<string>((resolve) =>
    connect(replica.port, '127.0.0.1')
      .on('connect', function (this: Socket) {
        this.destroy();
        resolve('connected');
      })
      .on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message)),
  );
  for (const u of started) u.req.end(BODY.slice(half));
  const seen = await Promise.all(started.map((u) => u.seen));
  const code = await exit;
  const next = await restart();
  assert.equal(fresh, 'ECONNREFUSED', 'a new connection is refused once the drain has begun');
  assert.equal(code, 0, 'the replica drained and exited 0');
  assert.deepEqual(
    seen.map((s) => [s.status ?? s.error, s.connection]),
    keys.map(() => [201, 'close']),
  );
  const replays = await Promise.all(keys.map((key) => keyedPost(next.url, auth, key, false).seen));
  assert.deepEqual(
    replays.map((r) => [r.status, r.id]),
    seen.map((s) => [201, s.id]),
    'each upload was stored once: its key replays that order',
  );
  return next;
}

/** What a draining replica logs once it accepts no new connection. */
const LISTENER_CLOSED = 'listener closed: new connections are refused, open ones are served';

const ENV = { RATE_LIMIT_POINTS: '1000000' };

describe.each([
  { engine: 'the embedded database', servers: false },
  { engine: 'PostgreSQL and Redis', servers: true },
])('SIGTERM with keyed POSTs in flight, on $engine', ({ servers }) => {
  let env: Record<string, string>;
  let cleanup: () => Promise<void>;
  let replica: Replica | undefined;
  beforeAll(async () => {
    if (servers) {
      const pg: PostgresCluster = await startPostgres();
      const redis: RedisServer = await startRedis();
      env = { ...ENV, DATABASE_URL: pg.url, REDIS_URL: redis.url };
      cleanup = async () => {
        await redis.stop();
        await pg.destroy();
      };
    } else {
      const data = testDataDir();
      env = { ...ENV, DATA_DIR: data.dataDir };
      cleanup = async () => data.remove();
    }
    replica = await startReplica(env);
  });
  afterAll(async () => {
    await replica?.stop('SIGKILL');
    await cleanup?.();
  });

  const restart = async () => (replica = await startReplica(env, { port: replica!.port }));
  test('50 in flight: every request is served (201), none refused or reset, each key stored once', async () => {
    await sigtermWithInFlight(replica!, 50, restart);
  });
  test('200 in flight: every request is served (201), none refused or reset, each key stored once', async () => {
    await sigtermWithInFlight(replica!, 200, restart);
  });
  test('5 uploads whose headers arrived before SIGTERM: each served once its body ends; a new connection is refused', async () => {
    await sigtermWithUploads(replica!, 5, restart);
  });
});
