import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
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
 * Every one of them reached the socket before the listener closed, so every one must be answered: 201, or 503 with
 * Connection: close and Retry-After. Then, on the restarted replica, every key is retried: each 201 replays the order
 * it created, and each key ends with exactly one order.
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
  const refused = seen.filter((s) => s.status === 503);
  const summary = {
    inFlight,
    created: created.length,
    refused: refused.length,
    resets: failed.length,
    resetsKeptAlive: failed.filter((s) => s.keepAlive).length,
    errors: [...new Set(failed.map((s) => s.error))],
  };
  console.log(`SIGTERM with ${inFlight} keyed POSTs in flight: ${JSON.stringify(summary)}`);
  assert.deepEqual(failed, [], 'no request that reached the socket saw a reset or a dropped connection');
  assert.deepEqual(
    seen.filter((s) => s.status !== 201 && s.status !== 503),
    [],
    'every request was answered 201 or 503',
  );
  for (const s of refused) {
    assert.equal(s.connection, 'close', 'a 503 while draining closes its connection');
    assert.equal(s.retryAfter, '1');
  }

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
  test('50 in flight: every request is answered, none reset, each key stored once', async () => {
    await sigtermWithInFlight(replica!, 50, restart);
  });
  test('200 in flight: every request is answered, none reset, each key stored once', async () => {
    await sigtermWithInFlight(replica!, 200, restart);
  });
});
