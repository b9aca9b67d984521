import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import pg from 'pg';
import { chromiumPath, launchChromium } from '../helpers/browser.js';
import { freePort, startPostgres, startRedis, type PostgresCluster, type RedisServer } from '../helpers/infra.js';
import { behindBalancerEnv, startNginx, type Nginx } from '../helpers/nginx.js';
import { startReplica, type Replica } from '../helpers/replica.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  eventTally,
  keyedCreate as create,
  ROLLING_RESTART,
  ROLLING_RESTART_ENV,
  runRollingRestart,
} from '../helpers/rollingRestart.js';
import { sseSubscriber } from '../helpers/sseSubscriber.js';
import { eventually } from '../helpers/load.js';
import { subscriber } from '../helpers/subscriber.js';
import { artifactDir } from '../helpers/testRun.js';

const { rate: RATE, seconds: LOAD_SECONDS, subscribers: SUBSCRIBERS } = ROLLING_RESTART;

/**
 * Two production replicas (NODE_ENV=production, an external issuer, one PostgreSQL cluster and one Redis of this
 * suite's own) behind Debian's nginx running deploy/nginx.conf itself: what compose deploys, without a Docker
 * engine. Every request of these tests goes through the balancer unless a test writes to one replica on purpose.
 */
describe('two replicas behind nginx (deploy/nginx.conf)', () => {
  let cluster: PostgresCluster;
  let redis: RedisServer;
  let issuer: TestServer;
  let nginx: Nginx;
  let db: pg.Client;
  const ports: [number, number] = [0, 0];
  const replicas: Replica[] = [];
  let env: Record<string, string>;
  let alice: string;
  let carol: string;

  const startApp = (i: 0 | 1) => startReplica(env, { port: ports[i] });

  beforeAll(async () => {
    await chromiumPath(); // fails before the cluster starts when no browser is here
    [cluster, redis, issuer] = await Promise.all([startPostgres(), startRedis(), startTestServer()]);
    db = new pg.Client({ connectionString: cluster.url });
    await db.connect();
    const [balancerPort, p1, p2] = await Promise.all([freePort(), freePort(), freePort()]);
    ports[0] = p1;
    ports[1] = p2;
    env = {
      // The development server's IdP stands in for Keycloak: an issuer in another process, as in production.
      ...behindBalancerEnv({
        databaseUrl: cluster.url,
        redisUrl: redis.url,
        issuer: issuer.running.app.issuer,
        balancerPort,
        trustProxy: '1',
      }),
      // compose's DRAIN_DELAY_S, and the limits and log sampling the rolling restart needs (see the helper).
      ...ROLLING_RESTART_ENV,
    };
    // One after the other: the first applies the migrations and seeds.
    replicas[0] = await startApp(0);
    replicas[1] = await startApp(1);
    nginx = await startNginx({ port: balancerPort, upstreams: [p1, p2] });
    [alice, carol] = await Promise.all([issuer.token('alice'), issuer.token('carol')]);
  }, 120_000);

  afterAll(async () => {
    await nginx?.stop();
    await Promise.all(replicas.map((r) => r?.stop()));
    await db?.end();
    await issuer?.close();
    await redis?.stop();
    await cluster?.destroy();
  });

  test('browser sign-in through the balancer: the IdP returns to it, and either replica honours the session', async () => {
    const shots = artifactDir('topology-signin');
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(`${nginx.url}/auth/login?returnTo=/auth/session`);
      assert.equal(new URL(page.url()).origin, new URL(issuer.running.app.issuer).origin, 'on the external issuer');
      await page.getByLabel('Username').fill('alice');
      await page.getByLabel('Password').fill('alice');
      await Promise.all([
        page.waitForURL(`${nginx.url}/auth/session`),
        page.getByRole('button', { name: 'Sign in' }).click(),
      ]);
      await page.screenshot({ path: path.join(shots, 'signed-in.png') });
      const session = JSON.parse(await page.locator('body').innerText()) as { sub: string };
      assert.equal(session.sub, 'alice');
      // Upstream keepalive spreads requests over both replicas: ten same-origin GraphQL calls all see alice.
      const names = await page.evaluate(async () => {
        const seen: string[] = [];
        for (let i = 0; i < 10; i++) {
          const res = await fetch('/graphql', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ query: '{ viewer { subject } }' }),
          });
          const body = (await res.json()) as { data?: { viewer: { subject: string } | null } };
          seen.push(body.data?.viewer?.subject ?? `status ${res.status}`);
        }
        return seen;
      });
      assert.deepEqual(names, Array(10).fill('alice'));
    } finally {
      await browser.close();
    }
  }, 60_000);

  test('subscribers connected through the balancer see orders written on each replica directly', async () => {
    // Whichever replica holds a stream, one of the two writes comes from the other one.
    const ws = subscriber(nginx.url, carol);
    const wsStream = ws.subscribe('subscription { orderCreated { id } }');
    const sse = sseSubscriber<{ orderCreated: { id: string } }>(
      nginx.url,
      carol,
      'subscription { orderCreated { id } }',
    );
    const wsIds = () => wsStream.received.map((r) => (r.data as { orderCreated: { id: string } }).orderCreated.id);
    const sseIds = () => sse.received.map((r) => r.data?.orderCreated.id ?? '');
    try {
      await ws.connected();
      // The SSE stream has no acknowledgement to wait for: probes until both streams have received one (so both are
      // live), then one that both receive, which the orders after it are compared from.
      await eventually('both streams to receive an order', async () => {
        await create(nginx.url, alice).expect(201);
        return wsStream.received.length > 0 && sse.received.length > 0;
      });
      const probe = (await create(nginx.url, alice).expect(201)).body.id as string;
      const has = (ids: () => string[]) => eventually('the probe on both streams', async () => ids().includes(probe));
      const fromProbe = (ids: string[]) => ids.slice(ids.indexOf(probe));
      await Promise.all([has(wsIds), has(sseIds)]);
      assert.deepEqual(fromProbe(wsIds()), [probe]);
      assert.deepEqual(fromProbe(sseIds()), [probe]);
      const onOne = (await create(replicas[0]!.url, alice).expect(201)).body.id as string;
      const onTwo = (await create(replicas[1]!.url, alice).expect(201)).body.id as string;
      const delivered = wsIds().length - fromProbe(wsIds()).length + 3;
      await Promise.all([wsStream.next(delivered), sse.next(sseIds().length - fromProbe(sseIds()).length + 3)]);
      assert.deepEqual(fromProbe(wsIds()), [probe, onOne, onTwo]);
      assert.deepEqual(fromProbe(sseIds()), [probe, onOne, onTwo]);
    } finally {
      sse.close();
      wsStream.dispose();
      await ws.dispose();
    }
  }, 60_000);

  test(`a rolling restart under ${RATE} requests/s for ${LOAD_SECONDS} s with ${SUBSCRIBERS} subscribers: no failed request, no duplicate order, every event exactly once to every subscriber`, async () => {
    const run = await runRollingRestart({
      nginx,
      replicas,
      restart: (i) => startApp(i as 0 | 1),
      db,
      token: alice,
      subscriberToken: carol,
    });
    const { outcomes, created, mutated } = run;
    assert.deepEqual(run.exits, [0, 0], 'each replica drained and exited cleanly');
    assert.ok(run.seconds >= LOAD_SECONDS - 1, `the load ran ${run.seconds} s`);
    assert.ok(outcomes.length / run.seconds >= 50, `${outcomes.length} requests in ${run.seconds} s`);
    const failed = outcomes.filter((o) => typeof o.status !== 'number' || o.status >= 300);
    console.log(
      `rolling restart: ${outcomes.length} requests (${created.length} keyed creates, ${mutated.length} un-keyed ` +
        `mutations), ${failed.length} failed; ${SUBSCRIBERS} subscribers`,
    );
    assert.deepEqual(
      failed.map((o) => `${o.name} → ${o.status} ${o.error ?? JSON.stringify(o.body)}`),
      [],
      await nginx.errorLog(),
    );
    assert.equal(created.length, run.keys.length, 'every keyed POST got its 201');
    assert.equal(mutated.length, outcomes.filter((o) => o.name === 'POST /graphql createOrder').length);

    // Exactly one order per key, and no order the client was not told about.
    assert.deepEqual(run.storedKeys, new Map(created.map((c) => [c.key, c.id])));
    assert.deepEqual(run.stored, run.expected, 'the orders stored are the ones answered, once each');

    // Every subscriber was cut by a restart, resumed (SSE with Last-Event-ID, WebSocket with
    // extensions.lastEventId) and holds every order created since the probe exactly once, in no other count.
    assert.deepEqual(run.missing, [], 'every subscriber receives every order: (subscriber, orders missing)');
    for (const [i, s] of run.sse.entries()) {
      assert.ok(s.reconnects.length >= 1, `SSE stream ${i} was never cut`);
      for (const r of s.reconnects) assert.match(r.lastEventId ?? '', /^\d+$/, `SSE ${i} resumed with Last-Event-ID`);
    }
    for (const [i, s] of run.ws.entries()) {
      assert.ok(s.closes.includes(1001), `WebSocket ${i} was never closed by a restart: ${JSON.stringify(s.closes)}`);
      assert.equal(s.failure, undefined, `WebSocket ${i} failed`);
    }
    for (const [i, s] of [...run.sse, ...run.ws].entries()) {
      assert.deepEqual([...s.ids].sort(), run.expected, `subscriber ${i}: each order once`);
    }
    const events = run.expected.length * SUBSCRIBERS;
    assert.deepEqual(eventTally(run), { expected: events, received: events, lost: 0, duplicated: 0, unexpected: 0 });
  }, 300_000);

  test('a replica killed in the middle of keyed POSTs: nginx sends them to the other replica, each stored once', async () => {
    const keys = Array.from({ length: 50 }, () => randomUUID());
    let killed: Promise<number | null> | undefined;
    const results = await Promise.all(
      keys.map((key) =>
        create(nginx.url, alice, key).then((res) => {
          killed ??= replicas[0]!.stop('SIGKILL');
          return { key, status: res.status, id: res.body.id as string | undefined };
        }),
      ),
    );
    assert.equal(await killed, null, 'replica 1 was killed by the signal');
    assert.deepEqual(
      results.filter((r) => r.status !== 201),
      [],
      await nginx.errorLog(),
    );
    const stored = await db.query<{ key: string; order_id: string }>(
      'select key, order_id from idempotency_keys where key = any($1)',
      [keys],
    );
    assert.deepEqual(new Map(stored.rows.map((r) => [r.key, r.order_id])), new Map(results.map((r) => [r.key, r.id])));
    const { rows } = await db.query<{ n: number }>('select count(*)::int as n from orders where id = any($1)', [
      results.map((r) => r.id),
    ]);
    assert.equal(rows[0]!.n, 50);
    replicas[0] = await startApp(0);
  }, 60_000);
});
