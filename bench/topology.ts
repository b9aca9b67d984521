/**
 * `npm run bench -- --topology`: thousands of live devices behind the shipped balancer (issue 34).
 *
 * Two production replicas (the tsc build in dist/, one PostgreSQL cluster and one Redis of the bench's own, trusting
 * only nginx: TRUST_PROXY=127.0.0.1) behind Debian's nginx on deploy/nginx.conf, as test:topology runs them. A
 * development replica on PGlite is the external OIDC issuer. Devices are WebSockets and SSE streams with one
 * `orderCreated` subscription each, ~20 per client address from 127.1.0.0/16 (as behind an office or carrier
 * network). In order, it states:
 *   1. ordinary requests (REST reads, GraphQL queries; 16 concurrent callers) with no stream open: p50/p99;
 *   2. the replicas' RSS with no stream, at 1,000 WebSockets and at all of them (per idle subscriber);
 *   3. WebSockets and SSE streams acknowledged through the balancer;
 *   4. one order created through the balancer: how many devices receive it, and when the last one does;
 *   5. the same ordinary requests with every stream open: errors, p99 and its ratio to (1);
 *   6. a soak (--soak seconds, 600 unless told): an order every second, 1 % of the devices closed and opened
 *      again every second; RSS sampled every 10 s, and its growth after the first minute's warm-up;
 *   7. a rolling restart (__tests__/helpers/rollingRestart.ts, the one test:topology asserts): the replicas started
 *      again with compose's DRAIN_DELAY_S=5, 200 subscribers (100 WebSocket, 100 SSE) resuming through nginx, and
 *      60 requests/s for 30 s of REST reads, keyed REST creates, GraphQL queries and un-keyed GraphQL mutations
 *      while each replica in turn gets SIGTERM and is started again: errors by kind of request, events
 *      expected/received/lost/duplicated, orders stored against orders answered, each with its target.
 *
 *   npm run bench -- --topology [--websockets 5000] [--sse 1000] [--per-address 20] [--soak 600]
 *                               [--only devices,soak,rolling-restart]
 */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loginWithPkce } from '../src/auth/pkceLogin.js';
import { openDevices, sseDevice, wsDevice, type Device } from '../__tests__/helpers/devices.js';
import { freePort, startPostgres, startRedis } from '../__tests__/helpers/infra.js';
import { behindBalancerEnv, startNginx, type Nginx } from '../__tests__/helpers/nginx.js';
import { startReplica, type Replica } from '../__tests__/helpers/replica.js';
import {
  eventTally,
  ROLLING_RESTART,
  ROLLING_RESTART_ENV,
  runRollingRestart,
  type RollingRestartRun,
} from '../__tests__/helpers/rollingRestart.js';
import { mfaLogin } from '../__tests__/helpers/server.js';
import { IMAGE_ALLOCATOR } from './allocator.js';
import { placeOrder } from './data.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const log = (message: string) => console.error(`[topology] ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/** Both replicas' memory, summed, right after a full collection in each (bench/gcProbe.mjs). */
async function afterFullGc(replicas: readonly Replica[]): Promise<GcReading> {
  const readings = await Promise.all(
    replicas.map((r) => {
      const logged = r.waitForLog((e) => e.msg === 'bench gc');
      r.child.kill('SIGUSR2');
      return logged as Promise<Record<keyof GcReading, number>>;
    }),
  );
  const sum = (key: keyof GcReading) => readings.reduce((a, r) => a + r[key], 0);
  return {
    rss: sum('rss'),
    heapTotal: sum('heapTotal'),
    heapUsed: sum('heapUsed'),
    external: sum('external'),
    arrayBuffers: sum('arrayBuffers'),
  };
}
interface GcReading {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

async function rssOf(replica: Replica): Promise<number> {
  const status = await readFile(`/proc/${replica.child.pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) * 1024;
}

const quantile = (sorted: readonly number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** The parts of the bench, in the order they run; --only names some of them. */
const PARTS = ['devices', 'soak', 'rolling-restart'] as const;
type Part = (typeof PARTS)[number];

export const TOPOLOGY_USAGE = `usage: npm run bench -- --topology [options]
  --websockets <n>    WebSocket devices (default 5000)
  --sse <n>           SSE devices after them (default 1000)
  --per-address <n>   devices per client address, from 127.1.0.0/16 (default 20)
  --soak <s>          seconds of soak after the devices (default 600; 0 leaves it out)
  --gc-every <s>      during the soak, also read the replicas after a full collection every <s> seconds (default 0:
                        only after the warm-up minute and at the end; the collections themselves change what V8 keeps)
  --only <parts>      comma-separated parts to run (default: all three, in this order):
                        devices          the devices through nginx: acknowledged, one order to each, ordinary
                                         requests' errors and p99 against none, RSS per idle subscriber
                        soak             then the soak: an order a second, 1 % of the devices reconnecting a second,
                                         RSS growth after warm-up (runs devices first)
                        rolling-restart  ${ROLLING_RESTART.subscribers} subscribers and ${ROLLING_RESTART.rate} requests/s for ${ROLLING_RESTART.seconds} s (REST reads, keyed creates,
                                         GraphQL queries, un-keyed GraphQL mutations) while each replica in turn gets
                                         SIGTERM and is started again: errors by kind, events lost or duplicated (~2 min)
  --tsx               run the replicas from the sources through tsx instead of dist/
  --help              this text`;

/** One figure: what was measured, beside its target, and whether it was met. */
const row = (figure: string, measured: string, target: string, met: boolean) =>
  `${figure}: ${measured} (target: ${target}; met: ${met ? 'yes' : 'no'})`;
const count = (n: number) => n.toLocaleString('en-US');

export async function runTopology(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      websockets: { type: 'string', default: '5000' },
      sse: { type: 'string', default: '1000' },
      'per-address': { type: 'string', default: '20' },
      soak: { type: 'string', default: '600' },
      'gc-every': { type: 'string', default: '0' },
      only: { type: 'string' },
      tsx: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(TOPOLOGY_USAGE);
    return 0;
  }
  const named = values.only?.split(',').map((p) => p.trim()) ?? [...PARTS];
  const unknown = named.filter((p) => !(PARTS as readonly string[]).includes(p));
  if (unknown.length) {
    console.error(`--only: no part named ${unknown.join(', ')} (parts: ${PARTS.join(', ')})\n\n${TOPOLOGY_USAGE}`);
    return 2;
  }
  const parts = new Set(named as Part[]);
  // The soak keeps the devices' streams open: it runs after them.
  if (parts.has('soak')) parts.add('devices');

  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  };
  try {
    const [cluster, redis] = await Promise.all([startPostgres(), startRedis()]);
    cleanups.push(
      () => cluster.destroy(),
      () => redis.stop(),
    );
    const issuer = await startReplica({ NODE_ENV: 'development' });
    cleanups.push(() => issuer.stop());
    const ports = await Promise.all([freePort(), freePort(), freePort()]);
    const [balancerPort, p1, p2] = ports as [number, number, number];
    const build = values.tsx ? {} : { build: { cwd: ROOT, entry: 'dist/src/main.js' } };
    const env = {
      ...behindBalancerEnv({
        databaseUrl: cluster.url,
        redisUrl: redis.url,
        issuer: `${issuer.url}/idp`,
        balancerPort,
        trustProxy: '127.0.0.1',
      }),
      RATE_LIMIT_POINTS: '1000000000',
      // One user holds every device: the per-user bound is not what this measures.
      STREAMS_MAX_PER_USER: '1000000',
    };
    // The rolling restart's replicas have what test:topology gives them (compose's DRAIN_DELAY_S among it).
    const restartEnv = { ...env, ...ROLLING_RESTART_ENV };
    // Each replica can be asked for a full collection and what it then holds (bench/gcProbe.mjs): the soak's reading.
    const gcProbe = ['--expose-gc', '--import', fileURLToPath(new URL('./gcProbe.mjs', import.meta.url))];
    const startApp = (i: number, settings: Record<string, string>) =>
      startReplica({ ...IMAGE_ALLOCATOR.env, ...settings }, { port: ports[i + 1]!, ...build, nodeArgs: gcProbe });
    const first = parts.has('devices') ? env : restartEnv;
    // One after the other: the first applies the migrations and seeds.
    const replicas = [await startApp(0, first)];
    replicas.push(await startApp(1, first));
    cleanups.push(() => Promise.all(replicas.map((r) => r.stop())));
    const nginx = await startNginx({ port: balancerPort, upstreams: [p1, p2] });
    cleanups.push(() => nginx.stop());
    const login = async (user: 'alice' | 'carol') =>
      (await loginWithPkce({ issuer: `${issuer.url}/idp`, username: user, password: user, ...mfaLogin(user) }))
        .accessToken;
    const token = await login('alice');
    log(
      `two production replicas behind nginx at ${nginx.url} (${IMAGE_ALLOCATOR.name}); load ${os.loadavg().map((l) => l.toFixed(2))}`,
    );

    if (parts.has('devices')) {
      const websockets = Number(values.websockets);
      const perAddress = Number(values['per-address']);
      const soakSeconds = parts.has('soak') ? Number(values.soak) : 0;
      await devicesAndSoak({
        nginx,
        replicas,
        token,
        websockets,
        sseStreams: Number(values.sse),
        perAddress,
        soakSeconds,
        gcEverySeconds: Number(values['gc-every']),
      });
    }
    if (parts.has('rolling-restart')) {
      if (parts.has('devices')) {
        log('the replicas start again with the rolling restart settings');
        for (const i of replicas.keys()) {
          await replicas[i]!.stop();
          replicas[i] = await startApp(i, restartEnv);
        }
      }
      const db = new pg.Client({ connectionString: cluster.url });
      await db.connect();
      cleanups.push(() => db.end());
      const { rate, seconds, subscribers } = ROLLING_RESTART;
      log(
        `rolling restart: ${subscribers} subscribers, ${rate} requests/s for ${seconds} s, each replica SIGTERM'd and ` +
          `started again; load ${os.loadavg().map((l) => l.toFixed(2))}`,
      );
      const run = await runRollingRestart({
        nginx,
        replicas,
        restart: (i) => startApp(i, restartEnv),
        db,
        token,
        subscriberToken: await login('carol'),
      });
      for (const line of rollingRestartRows(run)) console.log(line);
      if (run.outcomes.some((o) => o.status !== 200 && o.status !== 201)) log(await nginx.errorLog());
    }
    console.log(
      `load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} on ${os.cpus().length} cores`,
    );
    return 0;
  } catch (error) {
    console.error(error);
    return 1;
  } finally {
    await cleanup();
  }
}

/** Issue 34's rolling-restart row of the table, a line per figure. */
function rollingRestartRows(run: RollingRestartRun): string[] {
  const kinds: [string, string][] = [
    ['GET /v1/orders', 'REST reads'],
    ['POST /v1/orders', 'keyed REST creates'],
    ['POST /graphql query', 'GraphQL queries'],
    ['POST /graphql createOrder', 'un-keyed GraphQL mutations'],
  ];
  const failed = (o: RollingRestartRun['outcomes'][number]) => typeof o.status !== 'number' || o.status >= 300;
  const errorsOf = (name?: string) => {
    const of = run.outcomes.filter((o) => (name === undefined || o.name === name) && failed(o));
    const statuses = new Map<string, number>();
    for (const o of of) statuses.set(String(o.status), (statuses.get(String(o.status)) ?? 0) + 1);
    return {
      n: of.length,
      detail: statuses.size ? ` (${[...statuses].map(([s, n]) => `${n} × ${s}`).join(', ')})` : '',
    };
  };
  const all = errorsOf();
  const rate = run.outcomes.length / run.seconds;
  const lines = [
    row(
      'rolling restart through nginx, each replica in turn SIGTERM (DRAIN_DELAY_S=5) and started again',
      `${count(run.outcomes.length)} requests in ${run.seconds.toFixed(1)} s (${rate.toFixed(1)}/s); replicas exited ${run.exits.join(', ')}`,
      `≥ 50/s for ≥ ${ROLLING_RESTART.seconds - 1} s, each exit 0`,
      rate >= 50 && run.seconds >= ROLLING_RESTART.seconds - 1 && run.exits.every((e) => e === 0),
    ),
    row(
      'rolling restart, client-visible errors, all requests',
      `${all.n} of ${count(run.outcomes.length)}${all.detail}`,
      '0',
      all.n === 0,
    ),
  ];
  for (const [name, label] of kinds) {
    const e = errorsOf(name);
    const n = run.outcomes.filter((o) => o.name === name).length;
    lines.push(
      row(
        `rolling restart, ${label} (${name})`,
        `${count(n)} requests, ${e.n} errors${e.detail}`,
        '0 errors',
        e.n === 0,
      ),
    );
  }
  const sseResumed = run.sse.filter(
    (s) => s.reconnects.length > 0 && s.reconnects.every((r) => /^\d+$/.test(r.lastEventId ?? '')),
  ).length;
  const wsResumed = run.ws.filter((s) => s.closes.includes(1001) && s.failure === undefined).length;
  const subscribers = run.sse.length + run.ws.length;
  lines.push(
    row(
      'rolling restart, subscribers through nginx, cut by a restart and resumed',
      `${subscribers} (SSE ${sseResumed} of ${run.sse.length} resumed with Last-Event-ID, WebSocket ${wsResumed} of ${run.ws.length} after close 1001)`,
      `${ROLLING_RESTART.subscribers}, every one resumed`,
      subscribers === ROLLING_RESTART.subscribers && sseResumed + wsResumed === subscribers,
    ),
  );
  const t = eventTally(run);
  lines.push(
    row(
      'rolling restart, events (each order answered, to each subscriber)',
      `expected ${count(t.expected)}, received ${count(t.received)}, lost ${t.lost}, duplicated ${t.duplicated}, not among the orders answered ${t.unexpected}`,
      '0 lost, 0 duplicated',
      t.lost === 0 && t.duplicated === 0 && t.unexpected === 0,
    ),
  );
  const answered = run.created.length + run.mutated.length;
  const keysOnce =
    run.storedKeys.size === run.created.length && run.created.every((c) => run.storedKeys.get(c.key) === c.id);
  const same = run.stored.length === run.expected.length && run.stored.every((id, i) => id === run.expected[i]);
  lines.push(
    row(
      'rolling restart, orders stored against orders answered',
      `${count(answered)} answered (${count(run.created.length)} keyed creates, ${count(run.mutated.length)} un-keyed mutations), ${count(run.stored.length)} stored${same ? ', the same ones' : ', not the same ones'}; ${keysOnce ? 'one order per key' : 'keys and orders differ'}`,
      'the orders answered, each stored once',
      same && keysOnce,
    ),
  );
  return lines;
}

/** Parts 1 to 6 of the header: the devices through nginx, then the soak (none when soakSeconds is 0). */
async function devicesAndSoak(setup: {
  nginx: Nginx;
  replicas: Replica[];
  token: string;
  websockets: number;
  sseStreams: number;
  perAddress: number;
  soakSeconds: number;
  /** Readings after a full collection between the warm-up's and the end's, this far apart (0: none). */
  gcEverySeconds: number;
}) {
  const { nginx, replicas, token, websockets, sseStreams, perAddress, soakSeconds, gcEverySeconds } = setup;
  const rss = async () => (await Promise.all(replicas.map(rssOf))).reduce((a, b) => a + b, 0);
  /** 16 callers, 40 requests each, alternating a REST read and a GraphQL query: latencies and non-200s. */
  const ordinary = async () => {
    const latencies: number[] = [];
    const errors: string[] = [];
    await Promise.all(
      Array.from({ length: 16 }, async (_, caller) => {
        for (let i = 0; i < 40; i++) {
          const graphql = (caller + i) % 2 === 0;
          const start = performance.now();
          const res = await fetch(`${nginx.url}${graphql ? '/graphql' : '/v1/orders?limit=5'}`, {
            method: graphql ? 'POST' : 'GET',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            ...(graphql ? { body: JSON.stringify({ query: '{ products { sku } }' }) } : {}),
          }).catch((err: Error) => ({ status: 0, text: async () => err.message }));
          await res.text();
          latencies.push(performance.now() - start);
          if (res.status !== 200) errors.push(String(res.status));
        }
      }),
    );
    latencies.sort((a, b) => a - b);
    return { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), count: latencies.length, errors };
  };
  const createOrder = () => placeOrder(nginx.url, token);

  await ordinary(); // warm-up
  const quiet = await ordinary();
  log(`no streams: ${quiet.count} requests, p50 ${quiet.p50.toFixed(1)} ms, p99 ${quiet.p99.toFixed(1)} ms`);
  await sleep(2000);
  const rss0 = await rss();

  const opts = { url: nginx.url, token, perAddress };
  const first = Math.min(1000, websockets);
  const devices: Device[] = await openDevices('ws', first, opts);
  await sleep(3000);
  const rss1k = await rss();
  devices.push(...(await openDevices('ws', websockets - first, { ...opts, firstAddress: first / perAddress })));
  await sleep(3000);
  const rssAllWs = await rss();
  const sseFrom = Math.ceil(websockets / perAddress);
  devices.push(...(await openDevices('sse', sseStreams, { ...opts, firstAddress: sseFrom })));
  const ws = devices.filter((d) => d.kind === 'ws');
  const sse = devices.filter((d) => d.kind === 'sse');
  const acked = (ds: Device[]) => ds.filter((d) => d.acknowledgedAt && !d.refused).length;
  const refusals = new Map<string, number>();
  for (const d of devices) if (d.refused) refusals.set(d.refused, (refusals.get(d.refused) ?? 0) + 1);

  const sent = performance.now();
  const id = await createOrder();
  const deadline = performance.now() + 30_000;
  while (devices.some((d) => !d.refused && !d.received.has(id)) && performance.now() < deadline) await sleep(20);
  const arrivals = devices.flatMap((d) => (d.received.has(id) ? [d.received.get(id)! - sent] : []));
  const lastMs = Math.max(...arrivals);

  const busy = await ordinary();

  const perWs1k = (rss1k - rss0) / first;
  const perWsAll = (rssAllWs - rss0) / websockets;
  const lines = [
    `streams acknowledged through the balancer: WebSocket ${acked(ws)} of ${websockets} (${perAddress} per client address), SSE ${acked(sse)} of ${sseStreams}` +
      (refusals.size ? `; refused: ${JSON.stringify(Object.fromEntries(refusals))}` : ''),
    `one order created through the balancer: received by ${arrivals.length} of ${devices.length}; last after ${lastMs.toFixed(0)} ms (target: all, ≤ 2000 ms)`,
    `ordinary requests, no streams: p50 ${quiet.p50.toFixed(1)} ms, p99 ${quiet.p99.toFixed(1)} ms; with ${acked(devices)} streams: p50 ${busy.p50.toFixed(1)} ms, p99 ${busy.p99.toFixed(1)} ms (${(busy.p99 / quiet.p99).toFixed(2)}×, target ≤ 2×); errors ${busy.errors.length} of ${busy.count}`,
    `replicas' RSS (both): ${mb(rss0)} MB with no stream, ${mb(rss1k)} MB at ${first} WebSockets (${(perWs1k / 1024).toFixed(1)} kB per idle subscriber), ${mb(rssAllWs)} MB at ${websockets} (${(perWsAll / 1024).toFixed(1)} kB each), ${mb(await rss())} MB with ${sseStreams} SSE streams more`,
  ];
  for (const line of lines) console.log(line);

  if (soakSeconds > 0) {
    log(`soak: ${soakSeconds} s, an order every second, 1 % of the devices reconnecting every second`);
    // RSS between collections is a sawtooth (hundreds of MB, with teeth of two to five minutes that lengthen as V8
    // raises its limits), so a sample says where on a tooth it fell, not whether memory grows. The soak's growth is
    // read after a full collection in each replica instead (bench/gcProbe.mjs): what the replicas still hold once
    // the warm-up minute is over, against what they hold at the end, with the same devices open.
    const samples: { at: number; rss: number }[] = [];
    const start = performance.now();
    /** The readings after a collection: the warm-up's, then (--gc-every) whether what grows keeps growing. */
    const collected: ({ at: number } & GcReading)[] = [];
    let orders = 0;
    let reconnects = 0;
    let tick = 0;
    while (performance.now() - start < soakSeconds * 1000) {
      tick++;
      await createOrder();
      orders++;
      const churn = Math.max(1, Math.floor(devices.length / 100));
      for (let k = 0; k < churn; k++) {
        const i = (tick * churn + k) % devices.length;
        const old = devices[i]!;
        old.close();
        // The same index: the same source address as the device it replaces.
        const index = old.kind === 'ws' ? i : i - websockets;
        devices[i] = old.kind === 'ws' ? wsDevice(opts, index) : sseDevice({ ...opts, firstAddress: sseFrom }, index);
        reconnects++;
      }
      const at = (performance.now() - start) / 1000;
      if (tick % 10 === 0) samples.push({ at, rss: await rss() });
      const last = collected.at(-1);
      if (last ? gcEverySeconds > 0 && at - last.at >= gcEverySeconds : at >= 60) {
        collected.push({ at, ...(await afterFullGc(replicas)) });
      }
      await sleep(1000);
    }
    await sleep(3000);
    const live = devices.filter((d) => d.acknowledgedAt && !d.refused).length;
    const end = { at: (performance.now() - start) / 1000, ...(await afterFullGc(replicas)) };
    const from = collected[0] ?? end;
    const growth = (a: number, b: number) => ((b - a) / a) * 100;
    const rssGrowth = growth(from.rss, end.rss);
    const peak = Math.max(...samples.map((x) => x.rss));
    const change = (key: keyof GcReading) =>
      `${mb(from[key])} → ${mb(end[key])} MB (${growth(from[key], end[key]).toFixed(1)} %)`;
    console.log(
      `soak ${soakSeconds} s: ${orders} orders, ${reconnects} reconnects, ${live} of ${devices.length} devices live at the end; ` +
        `after a full collection at ${from.at.toFixed(0)} s and at ${end.at.toFixed(0)} s: RSS ${change('rss')}, ` +
        `V8 heap in use ${change('heapUsed')}, V8 heap committed ${change('heapTotal')}, outside the heap ` +
        `${change('external')} (of which ArrayBuffers ${change('arrayBuffers')}); between collections the RSS peaked ` +
        `at ${mb(peak)} MB (target ≤ 5 % growth after warm-up; ${rssGrowth <= 5 ? 'met' : 'not met'})`,
    );
    console.log(
      `soak after each full collection (s: RSS / heap in use MB): ${[...collected, end]
        .map((x) => `${x.at.toFixed(0)}: ${mb(x.rss)} / ${mb(x.heapUsed)}`)
        .join(', ')}`,
    );
    console.log(
      `soak RSS samples between collections, every 10 s (s: MB): ${samples.map((x) => `${x.at.toFixed(0)}: ${mb(x.rss)}`).join(', ')}`,
    );
  }
  for (const d of devices) d.close();
}
