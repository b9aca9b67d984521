import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { DomainError } from '../../src/domain/errors.js';
import { openPostgres } from '../../src/store/postgres.js';
import { startPostgres, type PostgresCluster } from '../helpers/infra.js';
import { eventually, startLoad, type Send } from '../helpers/load.js';
import { startReplica, type Replica } from '../helpers/replica.js';
import { ERROR_SCHEMA, SCIM_TOKEN } from '../helpers/scim.js';

/** A gauge's value from the replica's /metrics. */
async function gauge(replica: Replica, name: string): Promise<number> {
  const res = await request(replica.metricsUrl!).get('/metrics').expect(200);
  const line = res.text.split('\n').find((l) => l.startsWith(`${name} `));
  assert.ok(line, `metric ${name}`);
  return Number(line.slice(name.length + 1));
}

const latencies = (ms: readonly number[]) => {
  const sorted = [...ms].sort((a, b) => a - b);
  return { n: sorted.length, p50: sorted[sorted.length >> 1], max: sorted.at(-1) };
};

const OUTAGE_MS = 10_000;
const QUERY = '{ recentOrders(first: 5) { id status customer { name } } }';

let pg: PostgresCluster;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  await pg?.destroy();
});

describe('PostgreSQL stopped under load', () => {
  let replica: Replica;
  let auth: string;
  let orderId: string;
  beforeAll(async () => {
    replica = await startReplica({ DATABASE_URL: pg.url, SCIM_TOKEN });
    const { accessToken } = await loginWithPkce({ issuer: `${replica.url}/idp`, username: 'alice', password: 'alice' });
    auth = `Bearer ${accessToken}`;
    const res = await request(replica.url)
      .post('/v1/orders')
      .set('authorization', auth)
      .set('idempotency-key', randomUUID())
      .send({ items: [{ sku: 'DL-009', qty: 1 }] })
      .expect(201);
    orderId = (res.body as { id: string }).id;
  });
  afterAll(async () => {
    await replica?.stop('SIGKILL');
  });

  const send: Send = async (n) => {
    if (n % 2 === 0) {
      const res = await request(replica.url)
        .get(`/v1/orders/${orderId}`)
        .set('authorization', auth)
        .ok(() => true);
      return {
        name: 'rest',
        status: res.status,
        retryAfter: res.headers['retry-after'],
        contentType: res.headers['content-type'],
        body: res.body,
      };
    }
    const res = await request(replica.url)
      .post('/graphql')
      .set('authorization', auth)
      .send({ query: QUERY })
      .ok(() => true);
    return {
      name: 'graphql',
      status: res.status,
      retryAfter: res.headers['retry-after'],
      contentType: res.headers['content-type'],
      body: res.body,
    };
  };

  test('requests get 503 with Retry-After at once, /readyz says 503, and the app recovers without a restart', async () => {
    const pid = replica.child.pid;
    assert.equal(await gauge(replica, 'database_unreachable'), 0);
    const load = startLoad({ rate: 20, maxRequests: 2_000, send });
    await eventually('the load to be answered', async () => load.outcomes.filter((o) => o.status === 200).length >= 10);

    await pg.stop();
    const down = Date.now();
    // The first refused connection opens the circuit: from then on nothing waits for the database.
    await eventually('the circuit to open', async () => (await gauge(replica, 'database_unreachable')) === 1);
    assert.ok(
      replica.logs().some((e) => e.event === 'database.unreachable' && e.level === 40),
      'a warning says the database is unreachable',
    );
    // A burst while it is open: every request, REST and GraphQL alike, is 503 with Retry-After.
    const burst = await Promise.all(
      Array.from({ length: 50 }, async (_, n) => {
        const sentAt = performance.now();
        const o = await send(n);
        return { ...o, ms: performance.now() - sentAt };
      }),
    );
    assert.deepEqual(
      burst.filter((o) => o.status !== 503 || o.retryAfter !== '1'),
      [],
      'every request of the burst answered 503 with Retry-After',
    );
    await request(replica.url).get('/readyz').expect(503);
    await request(replica.url)
      .get(`/v1/orders/${orderId}`)
      .set('authorization', auth)
      .expect(503)
      .expect('retry-after', '1')
      .expect('content-type', /^application\/problem\+json/)
      .expect((res) => assert.equal((res.body as { code: string }).code, 'SERVICE_UNAVAILABLE'));
    await request(replica.url)
      .post('/graphql')
      .set('authorization', auth)
      .send({ query: QUERY })
      .expect(503)
      .expect('retry-after', '1')
      .expect((res) => {
        const { errors } = res.body as { errors: { extensions: { code: string } }[] };
        assert.ok(errors.length > 0);
        for (const e of errors) assert.equal(e.extensions.code, 'SERVICE_UNAVAILABLE');
      });
    // The browser's sign-in (a page for a person) and the directory's SCIM calls need the database too: 503 in their
    // own formats.
    await request(replica.url)
      .get('/auth/login')
      .expect(503)
      .expect('retry-after', '1')
      .expect('content-type', 'text/html; charset=utf-8')
      .expect((res) => assert.match(res.text, /<title>Sign-in is unavailable/));
    await request(replica.url)
      .get('/scim/v2/Users')
      .set('authorization', `Bearer ${SCIM_TOKEN}`)
      .expect(503)
      .expect('retry-after', '1')
      .expect('content-type', 'application/scim+json; charset=utf-8')
      .expect((res) => {
        const body = res.body as { schemas: string[]; status: string };
        assert.deepEqual(body.schemas, [ERROR_SCHEMA]);
        assert.equal(body.status, '503');
      });
    // The outage itself is the scenario: it lasts a fixed time, whatever the load does meanwhile.
    await new Promise((r) => setTimeout(r, OUTAGE_MS - (Date.now() - down)));
    const up = Date.now();
    await pg.start();

    await eventually('/readyz to answer 200 again', async () => (await request(replica.url).get('/readyz')).ok);
    assert.equal(await gauge(replica, 'database_unreachable'), 0, 'a probe closed the circuit');
    const recovered = Date.now();
    await eventually('requests to succeed again', async () =>
      load.outcomes.some((o) => o.sentAt > recovered && o.status === 200) ? true : undefined,
    );
    const outcomes = await load.done();

    assert.equal(replica.child.pid, pid);
    assert.equal(replica.child.exitCode, null, 'the replica recovered without a restart');
    const unexpected = outcomes.filter((o) => o.status !== 200 && o.status !== 503);
    assert.deepEqual(unexpected, [], 'every request got 200 or 503, never a 500 or a broken connection');

    const during = outcomes.filter((o) => o.sentAt > down && o.sentAt + o.ms < up);
    assert.ok(during.length >= 20, `${during.length} requests were sent during the outage`);
    const stopping = outcomes.filter((o) => o.status === 503);
    // The replica's own measure (its request log), which the test process's scheduling does not inflate.
    const served = replica
      .logs()
      .filter((e) => (e.res as { statusCode?: number } | undefined)?.statusCode === 503)
      .map((e) => e.responseTime as number);
    console.log(
      `PostgreSQL stopped: load during the outage ${JSON.stringify(latencies(during.map((o) => o.ms)))} ms; ` +
        `every 503, the stop itself included, ${JSON.stringify(latencies(stopping.map((o) => o.ms)))} ms; ` +
        `a burst of 50 with the circuit open ${JSON.stringify(latencies(burst.map((o) => Math.round(o.ms))))} ms; ` +
        `as the replica measured its 503s ${JSON.stringify(latencies(served))} ms`,
    );
    for (const o of during) {
      assert.equal(o.status, 503, `${o.name} during the outage`);
      assert.equal(o.retryAfter, '1');
      // Fail fast. The circuit answers without touching the database (the figures are printed above); this bound
      // only has to hold on a loaded machine, where the test's own event loop adds its lag to every request.
      assert.ok(o.ms < 5_000, `${o.name} took ${o.ms} ms`);
      if (o.name === 'rest') {
        assert.match(o.contentType ?? '', /^application\/problem\+json/);
        assert.equal((o.body as { status: number }).status, 503);
      } else {
        const { errors } = o.body as { errors: { extensions: { code: string } }[] };
        assert.equal(errors[0]?.extensions.code, 'SERVICE_UNAVAILABLE');
      }
    }
    const afterwards = outcomes.filter((o) => o.sentAt > recovered);
    assert.ok(afterwards.length > 0);
    assert.ok(
      afterwards.every((o) => o.status === 200),
      'every request sent after /readyz recovered succeeded',
    );
  });
});

/**
 * A listener that never accepts: a process that listens (backlog 1) and then blocks its event loop. Once the two
 * connections the kernel queues for it are taken, a SYN to it is dropped, as for a host that is gone.
 */
async function unansweredAddress() {
  const child = spawn(
    process.execPath,
    [
      '-e',
      "const s = require('net').createServer().listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {" +
        ' console.log(s.address().port); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); });',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  const port = Number(line.toString().trim());
  const fillers = await Promise.all(
    [0, 1].map(async () => {
      const socket = connect(port, '127.0.0.1');
      await once(socket, 'connect');
      return socket;
    }),
  );
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    close() {
      for (const socket of fillers) socket.destroy();
      child.kill('SIGKILL');
    },
  };
}

/** Whether a promise settles before the event loop next polls for I/O: then it made no network round trip. */
async function settlesWithoutIo(promise: Promise<unknown>): Promise<boolean> {
  const settled = promise.then(
    () => true,
    () => true,
  );
  return Promise.race([settled, new Promise<boolean>((resolve) => setImmediate(() => resolve(false)))]);
}

const unavailableCode = (error: unknown) => (error instanceof DomainError ? error.code : String(error));

describe('the database circuit: down is not busy', () => {
  test('a database host that answers nothing: every call fails within the connect bound, then at once, without waiting', async () => {
    const blackHole = await unansweredAddress();
    const db = await openPostgres(blackHole.url);
    const availability: boolean[] = [];
    db.onAvailability = (available) => availability.push(available);
    try {
      const started = performance.now();
      const wave = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const error = await db.query('select 1').then(
            () => 'answered',
            (e: unknown) => e,
          );
          return { code: unavailableCode(error), ms: performance.now() - started };
        }),
      );
      assert.deepEqual(new Set(wave.map((w) => w.code)), new Set(['SERVICE_UNAVAILABLE']));
      assert.deepEqual(availability, [false], 'the circuit opened once');
      // Open: a call fails before any I/O, a transaction and the readiness ping alike.
      for (const call of [db.query('select 1'), db.transaction(async () => 1), db.ping()]) {
        assert.equal(await settlesWithoutIo(call), true, 'failed without a round trip');
        assert.equal(await call.catch(unavailableCode), 'SERVICE_UNAVAILABLE');
      }
      console.log(
        `Unanswering database host: 20 concurrent calls all failed by ${Math.round(Math.max(...wave.map((w) => w.ms)))} ms` +
          ' (the TCP connect bound is 500 ms); later calls fail before any I/O',
      );
    } finally {
      await db.close();
      blackHole.close();
    }
  });

  test('a busy pool is waited for, not refused: 10 slow queries hold every connection and 20 more still succeed', async () => {
    const db = await openPostgres(pg.url);
    const availability: boolean[] = [];
    db.onAvailability = (available) => availability.push(available);
    try {
      const slow = Array.from({ length: 10 }, () => db.query('select pg_sleep(0.5)'));
      const waiting = Array.from({ length: 20 }, (_, i) => db.query<{ n: number }>('select $1::int as n', [i]));
      await Promise.all(slow);
      assert.deepEqual(
        (await Promise.all(waiting)).map((rows) => rows[0]!.n),
        Array.from({ length: 20 }, (_, i) => i),
      );
      assert.deepEqual(availability, [], 'the circuit stayed closed');
    } finally {
      await db.close();
    }
  });
});
