/**
 * `npm run bench`: the Orders API against its floor, side by side, on real PostgreSQL.
 *
 * The app (src/server.ts, in a child process) and the floor (bench/floor.ts: node:http + pg running
 * the same SQL, in another child) each get the same requests from autocannon in this process, one
 * server at a time, after a warm-up. Reported per scenario: requests/s, p50/p99 latency, SQL
 * statements per request (from each server's /metrics) and the app/floor ratios. Results also go
 * to bench/results/latest.json. Everything is bounded in time; the schema is dropped at the end.
 *
 *   npm run bench -- [--duration 8] [--warmup 2] [--connections 32] [--orders 100000]
 *                    [--only recentOrders-20,products-get] [--no-production] [--no-development] [--profile] [--check 0.25]
 *
 * `npm run bench -- --fanout [...]` runs the subscription fan-out bench instead (bench/fanout.ts).
 * `npm run bench -- --tracing [...]` measures what tracing costs (bench/tracing.ts).
 * `npm run bench -- --webhooks [...]` measures webhook deliveries (bench/webhooks.ts).
 * `npm run bench -- --topology [...]` runs thousands of live devices through nginx, a soak and a rolling restart
 * (bench/topology.ts; `--only rolling-restart` runs the restart alone).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { loginWithPkce } from '../src/auth/pkceLogin.js';
import { buildChildren, cleanupOnce, startChild, type ServerChild } from './children.js';
import { encodeOrderCursor, fingerprintOf } from '../src/domain/cursors.js';
import {
  connect,
  customerIdOf,
  deepPosition,
  growOrders,
  postgresProblem,
  recentOrdersPlan,
  someOrderOf,
} from './data.js';
import { readMachineCpu } from './cpu.js';
import type { CpuTime } from './ipc.js';
import type { PeerResult } from './report.js';
import { ignoreBudgetCountdown, runLoad, type LoadSpec } from './load.js';
import { difference, readCounters } from './metrics.js';
import { renderProfile, summarizeProfile, type ProfileSummary } from './profile.js';
import { problemsOf, renderTables, type ScenarioResult, type SideResult } from './report.js';
import { scenarioCatalogue, scenarios, type Scenario } from './scenarios.js';
import { describeRounds, measureRounds, type RoundSide, type Rounds } from './rounds.js';
import { MIX_READS_PER_WRITE, runMix, type MixStats } from './mix.js';
import { baselineOf, checkAgainstBaseline, renderTargets, writeBaseline, type FanoutFigures } from './targets.js';
import { execFileSync } from 'node:child_process';

// Every bench measures the tsc build in dist/ (`npm run build`, run here first), as production runs it; the
// sources through tsx only with --tsx. --no-build measures dist/ as it is.
const fromSources = process.argv.includes('--tsx');
if (!fromSources) {
  if (!process.argv.includes('--no-build') && !process.argv.includes('--help')) {
    console.error('[bench] npm run build (the app runs from dist/, as production runs it; --tsx for the sources)');
    const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
    execFileSync(process.execPath, [tsc, '-b', 'tsconfig.build.json'], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      stdio: 'inherit',
    });
  }
  process.env.BENCH_COMPILED = '1';
  // Absolute, so that the children built to JavaScript (bench/results/children/) find it too.
  process.env.BENCH_DIST = fileURLToPath(new URL('../dist/src/', import.meta.url));
  await buildChildren();
} else {
  delete process.env.BENCH_COMPILED;
  delete process.env.BENCH_DIST;
}
/** Options of the main bench that the separate benches below do not take. */
const sharedFlags = (args: string[]) => args.filter((a) => a !== '--no-build');

// A separate bench with its own options: WebSocket subscription fan-out (see bench/fanout.ts).
if (process.argv.includes('--fanout')) {
  const { runFanout } = await import('./fanout.js');
  process.exit(await runFanout(sharedFlags(process.argv.slice(2)).filter((a) => a !== '--fanout')));
}
// Thousands of live devices behind nginx on deploy/nginx.conf, a soak and a rolling restart (see bench/topology.ts).
if (process.argv.includes('--topology')) {
  const { runTopology } = await import('./topology.js');
  process.exit(await runTopology(sharedFlags(process.argv.slice(2)).filter((a) => a !== '--topology')));
}
// Hostile GraphQL documents beside normal traffic (see bench/abuse.ts).
if (process.argv.includes('--abuse')) {
  const { runAbuse } = await import('./abuse.js');
  process.exit(await runAbuse(sharedFlags(process.argv.slice(2)).filter((a) => a !== '--abuse' && a !== '--tsx')));
}

// Webhook deliveries to a local receiver, at 1 and 100 endpoints (see bench/webhooks.ts).
if (process.argv.includes('--webhooks')) {
  const { runWebhooks } = await import('./webhooks.js');
  process.exit(await runWebhooks(process.argv.slice(2).filter((a) => a !== '--webhooks')));
}

// What tracing costs: off against on at 100 % and at 1 % sampling (see bench/tracing.ts).
if (process.argv.includes('--tracing')) {
  const { runTracing } = await import('./tracing.js');
  process.exit(await runTracing(sharedFlags(process.argv.slice(2)).filter((a) => a !== '--tracing' && a !== '--tsx')));
}

/** The result-cache scenario's name for --only: 95 % reads of the list of 100, 5 % writes, RESULT_CACHE=on. */
const MIX_NAME = 'cache-mix';

const USAGE = `usage: npm run bench -- [options]
  --duration <s>      about how long each measured run lasts (default 8): it sends the number of
                      requests the warm-up's rate would answer in that time, and waits for all
  --warmup <s>        warm-up seconds before each measured run (default 2, at least 1)
  --connections <n>   concurrent keep-alive connections (default 32)
  --orders <n>        orders in the table while measuring (default 100000; the seed has 400)
  --only <names>      comma-separated scenario names to run (default: all)
  --schema <name>     use (and keep) this schema instead of a fresh one that is dropped at the end: a second run
                      with the same name reuses the orders the first one grew (1,000,000 take minutes to build)
  --no-production     measure the development instance (which serves the IdP) only, as before
  --no-development    leave out the secondary table (the development instance, embedded IdP)
                      By default the primary figures are of a replica configured as in production
                      (NODE_ENV=production, its issuer a separate process: the development instance's /idp),
                      so the measured process never serves the IdP; the development instance follows.
  --profile           CPU-profile the app during each measured run (slows it; numbers are then not comparable);
                      with --peers, Mercurius + jit and apollo-minimal too
  --tsx               run the measured replica from the sources through tsx instead of the tsc build in dist/
                      (by default the bench runs \`npm run build\` first and measures dist/, as production runs it)
  --no-build          measure dist/ as it is, without running \`npm run build\` first
  --peers             also measure Mercurius + graphql-jit and GraphQL Yoga (bench/peers/) on the list and one-order
                      scenarios, beside the app and the floor, and print the table of issues 34–36's targets
  --with-fanout       then run the fan-out bench (defaults, compiled) in the same invocation, for that table's rows
  --check             exit 1 if the list of 100's CPU efficiency against the floor (floor CPU/req ÷ app CPU/req) is
                      more than 15 % below bench/results/baseline.json's, or any run had errors
  --write-baseline    write this run's list-of-100 figures to bench/results/baseline.json
  --compare <dir>     also measure a production replica built in another checkout (<dir>/dist, \`npm run build\`
                      there first), as the row "compare", beside this one on every scenario: an A/B in one run
  --rounds <n>        measure each scenario's app, floor, Mercurius + jit (--peers) and compare replica (--compare)
                      <n> times, in turn, the order rotating each round; print every round's figures and the
                      median of each round's ratio, which the targets table and --check then use (default 1)
  --min-ratio <ratio> exit 1 if any scenario's app/floor throughput ratio is below <ratio>, or any run had errors
  --fanout            run the WebSocket subscription fan-out bench instead (npm run bench -- --fanout --help)
  --abuse             send each hostile GraphQL document for 30 s beside normal traffic (--seconds <s>)
  --tracing           CPU per request with tracing off, on at 100 % and at 1 % sampling (--rounds, --requests)
  --webhooks          deliveries/s to a local receiver and p99 from commit to delivery, at 1 and 100 endpoints
  --topology          two production replicas behind nginx on deploy/nginx.conf: 5,000 WebSockets + 1,000 SSE, a
                      10-minute soak, then a rolling restart under mixed load with 200 subscribers (about 15 min);
                      --only devices,soak,rolling-restart picks parts (npm run bench -- --topology --help)

scenarios (--only):
${scenarioCatalogue()
  .map(({ name, description }) => `  ${name.padEnd(18)}  ${description}`)
  .join('\n')}
  ${MIX_NAME.padEnd(18)}  list of 100 (staff) and createOrder (alice), 19 to 1, on a replica with RESULT_CACHE=on,
                      against the floor's list of 100 (production replica only)

needs PostgreSQL at DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test); REDIS_URL is used when set`;

const { values: flags } = parseArgs({
  allowNegative: true,
  options: {
    duration: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '32' },
    orders: { type: 'string', default: '100000' },
    only: { type: 'string' },
    schema: { type: 'string' },
    profile: { type: 'boolean', default: false },
    production: { type: 'boolean', default: true },
    development: { type: 'boolean', default: true },
    check: { type: 'boolean', default: false },
    'min-ratio': { type: 'string' },
    tsx: { type: 'boolean', default: false },
    build: { type: 'boolean', default: true },
    peers: { type: 'boolean', default: false },
    'with-fanout': { type: 'boolean', default: false },
    'write-baseline': { type: 'boolean', default: false },
    compare: { type: 'string' },
    rounds: { type: 'string', default: '1' },
    help: { type: 'boolean', default: false },
  },
});
if (flags.help) {
  console.log(USAGE);
  process.exit(0);
}

function numberFlag(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max) {
    console.error(`--${name} must be a number from ${min} to ${max}, got ${JSON.stringify(value)}\n\n${USAGE}`);
    process.exit(2);
  }
  return n;
}

const options = {
  // Bounded so that a typo cannot start an hour-long run.
  seconds: numberFlag('duration', flags.duration, 1, 120),
  warmupSeconds: numberFlag('warmup', flags.warmup, 1, 60),
  connections: Math.round(numberFlag('connections', flags.connections, 1, 512)),
  orders: Math.round(numberFlag('orders', flags.orders, 0, 2_000_000)),
  minRatio: flags['min-ratio'] === undefined ? undefined : numberFlag('min-ratio', flags['min-ratio'], 0, 100),
  check: flags.check,
  writeBaseline: flags['write-baseline'],
  compiled: !flags.tsx,
  build: flags.build,
  peers: flags.peers,
  withFanout: flags['with-fanout'],
  compare: flags.compare,
  rounds: Math.round(numberFlag('rounds', flags.rounds, 1, 20)),
  only: flags.only?.split(',').map((s) => s.trim()),
  profile: flags.profile,
  production: flags.production,
  development: flags.development || !flags.production,
};

const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
if (flags.schema !== undefined && !/^bench_\w{1,40}$/.test(flags.schema)) {
  console.error(`--schema must be bench_ and letters, digits or _, got ${JSON.stringify(flags.schema)}\n\n${USAGE}`);
  process.exit(2);
}
/** A kept schema (--schema) is left in place at the end, for the next run to reuse its orders. */
const keepSchema = flags.schema !== undefined;
const schema = flags.schema ?? `bench_${randomBytes(6).toString('hex')}`;
const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));
const profileDir = join(resultsDir, 'profiles');

const log = (message: string) => console.error(`[bench] ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const redacted = (url: string) => url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');

let admin: pg.Client | undefined;

/** Stops both servers and drops the schema; safe to call from every exit path, runs once. */
const cleanup = cleanupOnce({
  databaseUrl,
  schema,
  keep: keepSchema,
  log,
  first: async () => void (await admin?.end()),
});

/** One plain request, for the correctness check before measuring. */
async function fetchOnce(spec: LoadSpec): Promise<{ status: number; text: string }> {
  const res = await fetch(spec.url, {
    method: spec.method,
    headers: spec.headers,
    ...(spec.body !== undefined ? { body: spec.body } : {}),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, text: await res.text() };
}

/**
 * Before measuring, app and floor must answer 200 without errors and about the same orders (same
 * ids, same order), so the floor really does the app's work. Returns each side's body, which every
 * response during the run must then match.
 */
async function checkSameWork(scenario: Scenario, app: string, floor: string) {
  const answers = await Promise.all([fetchOnce(scenario.request(app)), fetchOnce(scenario.request(floor))]);
  const ids: string[][] = [];
  for (const [side, answer] of [
    ['app', answers[0]],
    ['floor', answers[1]],
  ] as const) {
    if (answer.status !== 200) throw new Error(`${scenario.name}: ${side} answered ${answer.status}: ${answer.text}`);
    const body = JSON.parse(answer.text) as { errors?: unknown };
    if (body.errors) throw new Error(`${scenario.name}: ${side} answered with errors: ${answer.text}`);
    const problem = scenario.expect(scenario.ids(body));
    if (problem) throw new Error(`${scenario.name}: ${side}: ${problem}`);
    ids.push(scenario.ids(body));
  }
  if (JSON.stringify(ids[0]) !== JSON.stringify(ids[1])) {
    throw new Error(`${scenario.name}: app and floor answered about different records:\n${ids[0]}\n${ids[1]}`);
  }
  return { appBody: answers[0].text, floorBody: answers[1].text, identical: answers[0].text === answers[1].text };
}

const cpuMicros = (t: CpuTime) => t.user + t.system;

/** The peers (bench/peers/): each serves the list and one-order scenarios' schema subset, without auth. */
const PEERS: readonly { name: string; script: string; env?: Record<string, string> }[] = [
  { name: 'mercurius+jit', script: './peers/mercurius.ts' },
  { name: 'yoga', script: './peers/yoga.ts' },
  // The stack this app is built on, bare: what Apollo Server 5 on Express 5 costs before any of the app's own work.
  { name: 'apollo', script: './peers/apollo.ts' },
  { name: 'apollo+jit', script: './peers/apollo.ts', env: { BENCH_APOLLO_JIT: '1' } },
  // The same stack on this app's request path (front door, hash once, Apollo by hash, jit), with none of its features.
  { name: 'apollo-minimal', script: './peers/apolloMinimal.ts' },
];
/** The peers that --rounds measures again in every round: those a target compares the app with. */
const ROUND_PEERS = new Set(['mercurius+jit', 'compare']);
const PEER_SCENARIOS = new Set(['recentOrders-20', 'recentOrders-100', 'order-by-id', 'orders-filtered-50']);
/** The peers that --profile profiles beside the app: the other stack, and this stack with none of the app's features. */
const PROFILED_PEERS = new Set(['mercurius+jit', 'apollo-minimal']);

/** A peer must answer 200, without errors, about the same records as the floor; returns its body. */
async function checkPeer(scenario: Scenario, name: string, peer: string, floorBody: string): Promise<string> {
  const answer = await fetchOnce(scenario.request(peer));
  if (answer.status !== 200) throw new Error(`${scenario.name}: ${name} answered ${answer.status}: ${answer.text}`);
  const body = JSON.parse(answer.text) as { errors?: unknown };
  if (body.errors) throw new Error(`${scenario.name}: ${name} answered with errors: ${answer.text}`);
  const ids = scenario.ids(body);
  const floorIds = scenario.ids(JSON.parse(floorBody));
  if (JSON.stringify(ids) !== JSON.stringify(floorIds)) {
    throw new Error(`${scenario.name}: ${name} and the floor answered about different records:\n${ids}\n${floorIds}`);
  }
  return answer.text;
}

/** Warm-up, then the measured run with the server's counters and CPU time read around it. */
async function measure(
  child: ServerChild,
  spec: LoadSpec,
  profile: boolean,
): Promise<{ result: SideResult; warmupProblems: string[] }> {
  const url = child.ready.url;
  const warmupProblems: string[] = [];
  // The warm-up also sets the size of the measured run: `seconds` worth of requests at its rate.
  const warm = await runLoad(
    { ...spec, expectBody: undefined },
    { connections: options.connections, seconds: options.warmupSeconds },
  );
  if (warm.non2xx || warm.errors) warmupProblems.push(`warm-up: ${warm.non2xx} non-2xx, ${warm.errors} errors`);
  const amount = Math.max(options.connections, Math.round(warm.rps * options.seconds));
  await sleep(200);
  const metricsUrl = child.ready.metricsUrl ?? url;
  const before = await readCounters(metricsUrl);
  const statementsBefore = (await child.request('request-statements')) as number | null;
  const serverBefore = await child.cpu();
  const machineBefore = await readMachineCpu();
  const loadgenBefore = process.cpuUsage();
  const started = performance.now();
  if (profile) await child.request('profile-start');
  const stats = await runLoad(spec, { connections: options.connections, seconds: options.seconds, amount });
  // CPU is read right after the last answer, so the window holds the run and little else.
  const loadgen = cpuMicros(process.cpuUsage(loadgenBefore)) / 1000;
  const machineAfter = await readMachineCpu();
  const server = (cpuMicros(await child.cpu()) - cpuMicros(serverBefore)) / 1000;
  const windowMs = performance.now() - started;
  const profilePath = profile ? ((await child.request('profile-stop')) as string) : undefined;
  // A run by amount leaves nothing in flight; a run cut short by its time limit might.
  await sleep(stats.cutShort ? 1000 : 100);
  const statementsAfter = (await child.request('request-statements')) as number | null;
  const counted = difference(await readCounters(metricsUrl), before);
  const served = counted.graphqlRequests;
  // The app's own requests' statements where it counts them (bench/appServer.ts); else every statement of the process.
  const statements =
    statementsBefore !== null && statementsAfter !== null ? statementsAfter - statementsBefore : counted.sql;
  const percent = (ms: number) => (100 * ms) / windowMs;
  const postgres =
    machineAfter.postgresMs !== null && machineBefore.postgresMs !== null
      ? Math.max(0, machineAfter.postgresMs - machineBefore.postgresMs)
      : null;
  const machine = machineAfter.busyMs - machineBefore.busyMs;
  return {
    warmupProblems,
    result: {
      stats,
      served,
      sqlStatements: statements,
      sqlPerRequest: served ? statements / served : 0,
      graphqlErrors: counted.graphqlErrors,
      cpuUsPerRequest: served ? (1000 * server) / served : 0,
      cpu: {
        windowMs,
        serverPercent: percent(server),
        postgresPercent: postgres === null ? null : percent(postgres),
        loadGeneratorPercent: percent(loadgen),
        machinePercent: percent(machine),
        otherPercent: percent(Math.max(0, machine - server - loadgen - (postgres ?? 0))),
      },
      ...(profilePath ? { profile: profilePath } : {}),
    },
  };
}

interface CacheMixResult {
  readonly description: string;
  readonly app: {
    readonly stats: MixStats;
    readonly sqlPerRequest: number;
    readonly cpuUsPerRequest: number;
    readonly hits: number;
    readonly misses: number;
    readonly hitRate: number;
  };
  readonly floor: SideResult;
  readonly throughputRatio: number;
  readonly cpuPerRequestRatio: number;
  /** The public `GET {products}` on the same RESULT_CACHE=on replica, against the floor's products. */
  readonly products?: { app: SideResult; floor: SideResult; throughputRatio: number; cpuPerRequestRatio: number };
  readonly loadAverage: number[];
  readonly problems: string[];
}

/**
 * The result-cache target: a third replica, production as the measured one but with RESULT_CACHE=on, under 19 reads
 * of the staff list of 100 to 1 createOrder, against the floor's list of 100 measured right after it.
 */
async function runCacheMix(opts: {
  issuer: string;
  appEnv: Record<string, string | undefined>;
  floor: ServerChild;
  staffToken: string;
  writerToken: string;
  list: Scenario;
  products?: Scenario;
}): Promise<CacheMixResult> {
  const cached = await startChild('app (production, result cache)', './appServer.ts', {
    ...opts.appEnv,
    BENCH_OIDC_ISSUER: opts.issuer,
    NODE_ENV: 'production',
    RESULT_CACHE: 'on',
    BENCH_PROFILE_DIR: options.profile ? profileDir : undefined,
  });
  try {
    log(`app (production, RESULT_CACHE=on) listening at ${cached.ready.url}; measuring ${MIX_NAME}`);
    const url = cached.ready.url;
    const mix = { url, staffToken: opts.staffToken, writerToken: opts.writerToken, connections: options.connections };
    const warm = await runMix({ ...mix, seconds: options.warmupSeconds });
    const amount = Math.max(options.connections * (MIX_READS_PER_WRITE + 1), Math.round(warm.rps * options.seconds));
    await sleep(200);
    const metricsUrl = cached.ready.metricsUrl ?? url;
    const before = await readCounters(metricsUrl);
    const cpuBefore = await cached.cpu();
    if (options.profile) await cached.request('profile-start');
    const stats = await runMix({ ...mix, seconds: options.seconds, amount });
    const server = (cpuMicros(await cached.cpu()) - cpuMicros(cpuBefore)) / 1000;
    if (options.profile) {
      const path = join(profileDir, `production-${MIX_NAME}.cpuprofile`);
      await rename((await cached.request('profile-stop')) as string, path);
      console.log(`\n${renderProfile(`production ${MIX_NAME}`, path, await summarizeProfile(path))}`);
    }
    await sleep(stats.cutShort ? 1000 : 100);
    const counted = difference(await readCounters(metricsUrl), before);
    const floor = await measure(opts.floor, { ...opts.list.request(opts.floor.ready.url) }, false);
    const products = opts.products && (await measureCachedProducts(cached, opts.floor, opts.products));
    const served = counted.graphqlRequests;
    const looked = counted.cacheHits + counted.cacheMisses;
    const problems = [
      ...(warm.non2xx || warm.errors || warm.failed
        ? [`app warm-up: ${warm.non2xx} non-2xx, ${warm.failed} failed`]
        : []),
      ...(stats.non2xx ? [`app: ${stats.non2xx} non-2xx`] : []),
      ...(stats.errors ? [`app: ${stats.errors} connection errors/timeouts`] : []),
      ...(stats.failed ? [`app: ${stats.failed} responses with GraphQL errors or no order`] : []),
      ...(stats.staleReads ? [`app: ${stats.staleReads} stale reads`] : []),
      ...(stats.cutShort ? ['app: stopped by the time limit'] : []),
      ...floor.warmupProblems.map((p) => `floor ${p}`),
      ...problemsOf('floor', floor.result),
      ...(products?.problems ?? []),
    ];
    const result: CacheMixResult = {
      description: `POST list of 100 as staff ×${MIX_READS_PER_WRITE}, createOrder as alice ×1, RESULT_CACHE=on`,
      app: {
        stats,
        sqlPerRequest: served ? counted.sql / served : 0,
        cpuUsPerRequest: served ? (1000 * server) / served : 0,
        hits: counted.cacheHits,
        misses: counted.cacheMisses,
        hitRate: looked ? counted.cacheHits / looked : 0,
      },
      floor: floor.result,
      throughputRatio: floor.result.stats.rps ? stats.rps / floor.result.stats.rps : 0,
      cpuPerRequestRatio: floor.result.cpuUsPerRequest
        ? (served ? (1000 * server) / served : 0) / floor.result.cpuUsPerRequest
        : 0,
      ...(products ? { products: products.result } : {}),
      loadAverage: os.loadavg(),
      problems,
    };
    log(
      `${MIX_NAME}: app ${Math.round(stats.rps)} req/s, floor ${Math.round(floor.result.stats.rps)} req/s ` +
        `(ratio ${result.throughputRatio.toFixed(2)}), hit rate ${(100 * result.app.hitRate).toFixed(1)} %, ` +
        `stale reads ${stats.staleReads} of ${stats.checkedReads}${problems.length ? ' — FLAGGED' : ''}`,
    );
    return result;
  } finally {
    await cached.stop();
  }
}

/** The public products GET on the RESULT_CACHE=on replica (after the mix: its entry is warm), then on the floor. */
async function measureCachedProducts(cached: ServerChild, floor: ServerChild, scenario: Scenario) {
  const check = await checkSameWork(scenario, cached.ready.url, floor.ready.url);
  const a = await measure(
    cached,
    { ...scenario.request(cached.ready.url), expectBody: check.appBody, normalize: ignoreBudgetCountdown },
    false,
  );
  const f = await measure(floor, { ...scenario.request(floor.ready.url), expectBody: check.floorBody }, false);
  const result = {
    app: a.result,
    floor: f.result,
    throughputRatio: f.result.stats.rps ? a.result.stats.rps / f.result.stats.rps : 0,
    cpuPerRequestRatio: f.result.cpuUsPerRequest ? a.result.cpuUsPerRequest / f.result.cpuUsPerRequest : 0,
  };
  log(
    `${scenario.name} with RESULT_CACHE=on: app ${Math.round(a.result.stats.rps)} req/s, floor ` +
      `${Math.round(f.result.stats.rps)} req/s (ratio ${result.throughputRatio.toFixed(2)}, CPU/request ` +
      `${result.cpuPerRequestRatio.toFixed(2)}×)`,
  );
  const problems = [
    ...a.warmupProblems.map((p) => `cached products ${p}`),
    ...f.warmupProblems.map((p) => `floor products ${p}`),
    ...problemsOf('app', a.result).map((p) => `cached products ${p}`),
    ...problemsOf('floor', f.result).map((p) => `products ${p}`),
  ];
  return { result, problems };
}

function renderMix(r: CacheMixResult): string {
  const a = r.app;
  const s = a.stats;
  return [
    `Result cache, ${MIX_NAME}: ${r.description}`,
    `  app   ${Math.round(s.rps).toLocaleString('en-US')} req/s (${s.reads} reads, ${s.writes} writes), p50 ${s.p50Ms.toFixed(1)} ms, ` +
      `p99 ${s.p99Ms.toFixed(1)} ms, SQL/req ${a.sqlPerRequest.toFixed(2)}, CPU ${Math.round(a.cpuUsPerRequest)} µs/req`,
    `  floor ${Math.round(r.floor.stats.rps).toLocaleString('en-US')} req/s (list of 100 only), CPU ${Math.round(r.floor.cpuUsPerRequest)} µs/req`,
    `  ratio ${r.throughputRatio.toFixed(2)} req/s, ${r.cpuPerRequestRatio.toFixed(2)}× CPU/req; hit rate ` +
      `${(100 * a.hitRate).toFixed(1)} % (${a.hits} hits, ${a.misses} misses); stale reads ${s.staleReads} of ` +
      `${s.checkedReads} checked (max ${s.maxStaleMs.toFixed(1)} ms); load average ${r.loadAverage.map((l) => l.toFixed(1)).join(' ')}`,
    ...(r.products
      ? [
          `Public GET {products} on the same RESULT_CACHE=on replica: app ${Math.round(r.products.app.stats.rps).toLocaleString('en-US')} req/s, ` +
            `floor ${Math.round(r.products.floor.stats.rps).toLocaleString('en-US')} req/s, ratio ${r.products.throughputRatio.toFixed(2)}; ` +
            `CPU ${Math.round(r.products.app.cpuUsPerRequest)} / ${Math.round(r.products.floor.cpuUsPerRequest)} µs/req ` +
            `(${r.products.cpuPerRequestRatio.toFixed(2)}×); SQL/req ${r.products.app.sqlPerRequest.toFixed(2)}`,
        ]
      : []),
    ...(r.problems.length ? [`  FLAGGED: ${r.problems.join('; ')}`] : []),
  ].join('\n');
}

async function main(): Promise<number> {
  log(`PostgreSQL ${redacted(databaseUrl)}, schema ${schema}${process.env.REDIS_URL ? ', with Redis' : ''}`);
  const appEnv = { DATABASE_URL: databaseUrl, DATABASE_SCHEMA: schema, REDIS_URL: process.env.REDIS_URL };
  const profileEnv = { BENCH_PROFILE_DIR: options.profile ? profileDir : undefined };
  // The development instance has the embedded IdP that issues the bench's tokens.
  const idpApp = await startChild('app', './appServer.ts', { ...appEnv, ...(options.production ? {} : profileEnv) });
  log(`app (development, embedded IdP) listening at ${idpApp.ready.url}`);
  const issuer = idpApp.ready.issuer!;
  // With --production the measured app is a second replica configured as in production: it trusts
  // the first one's IdP as its external issuer and has none of its own.
  const app = options.production
    ? await startChild('app (production)', './appServer.ts', {
        ...appEnv,
        ...profileEnv,
        BENCH_OIDC_ISSUER: issuer,
        NODE_ENV: 'production',
      })
    : idpApp;
  if (options.production) log(`app (production, issuer ${issuer}) listening at ${app.ready.url}`);

  admin = await connect(databaseUrl, schema);
  const started = Date.now();
  const grown = await growOrders(admin, options.orders);
  log(`orders: ${grown.before} seeded → ${grown.after} (${Date.now() - started} ms)`);
  const plan = await recentOrdersPlan(admin);
  log(`plan of the staff list: ${plan}`);
  const aliceId = await customerIdOf(admin, 'alice');
  const orderId = await someOrderOf(admin, aliceId);
  const depth = await deepPosition(admin, Math.min(10_000 * 50, Math.floor(grown.after / 2)));
  const deepCursor = encodeOrderCursor(depth, fingerprintOf([{}, 'createdAt', 'desc']));
  log(`orders-page-10000 starts ${depth.depth.toLocaleString('en-US')} orders in`);
  const since = new Date(Date.now() - 30 * 86_400_000).toISOString();
  await admin.end();
  admin = undefined;

  const login = async (user: string) => (await loginWithPkce({ issuer, username: user, password: user })).accessToken;
  const [staffToken, customerToken] = [await login('carol'), await login('alice')];
  log('signed in as carol (staff) and alice (customer) through the PKCE flow');

  const floor = await startChild('floor', './floor.ts', {
    DATABASE_URL: databaseUrl,
    DATABASE_SCHEMA: schema,
    BENCH_OWNER_CUSTOMER_ID: aliceId,
  });
  log(`floor listening at ${floor.ready.url}`);

  const all = scenarios({ staffToken, customerToken, customerOrderId: orderId, deepCursor, since });
  const chosen = all.filter((s) => !options.only || options.only.includes(s.name));
  const mixChosen = options.production && (!options.only || options.only.includes(MIX_NAME));
  if (!chosen.length && !mixChosen) throw new Error(`--only matched no scenario`);

  const peerChildren: [string, ServerChild][] = [];
  const abLines: string[] = [];
  const peerProblems: string[] = [];
  if (options.compare) {
    const dist = join(options.compare, 'dist', 'src');
    const child = await startChild('compare', './appServer.ts', {
      ...appEnv,
      BENCH_OIDC_ISSUER: issuer,
      NODE_ENV: 'production',
      BENCH_DIST: `${dist}/`,
    });
    log(`compare (production, from ${dist}) listening at ${child.ready.url}`);
    peerChildren.push(['compare', child]);
  }
  if (options.peers) {
    for (const { name, script, env } of PEERS) {
      // Its own folder: each profiler numbers its files from 1 (app-1.cpuprofile).
      const profiled = PROFILED_PEERS.has(name) && options.profile ? { BENCH_PROFILE_DIR: join(profileDir, name) } : {};
      const child = await startChild(name, script, {
        DATABASE_URL: databaseUrl,
        DATABASE_SCHEMA: schema,
        ...env,
        ...profiled,
      });
      log(`${name} listening at ${child.ready.url}`);
      peerChildren.push([name, child]);
    }
  }
  const profiles: { scenario: string; path: string; summary: ProfileSummary; usPerRequest: number }[] = [];
  /** Every chosen scenario against one app instance, each beside a fresh floor run. */
  async function runScenarios(app: ServerChild, label: string): Promise<ScenarioResult[]> {
    const results: ScenarioResult[] = [];
    for (const scenario of chosen) {
      const check = await checkSameWork(scenario, app.ready.url, floor.ready.url);
      log(
        `${label} ${scenario.name}: same answer from app and floor${check.identical ? ' (byte-identical)' : ''}; measuring`,
      );
      const a = await measure(
        app,
        { ...scenario.request(app.ready.url), expectBody: check.appBody, normalize: ignoreBudgetCountdown },
        options.profile,
      );
      const f = await measure(floor, { ...scenario.request(floor.ready.url), expectBody: check.floorBody }, false);
      const peers: PeerResult[] = [];
      for (const [name, peer] of peerChildren) {
        if (label !== 'production' || (name !== 'compare' && !PEER_SCENARIOS.has(scenario.name))) continue;
        const expectBody = await checkPeer(scenario, name, peer.ready.url, check.floorBody);
        const profiled = options.profile && PROFILED_PEERS.has(name);
        const p = await measure(
          peer,
          { ...scenario.request(peer.ready.url), expectBody, normalize: ignoreBudgetCountdown },
          profiled,
        );
        if (p.result.profile) {
          const path = join(profileDir, `${name}-${scenario.name}.cpuprofile`);
          await rename(p.result.profile, path);
          profiles.push({
            scenario: `${name} ${scenario.name}`,
            path,
            summary: await summarizeProfile(path, 20),
            usPerRequest: p.result.cpuUsPerRequest,
          });
        }
        peerProblems.push(
          ...p.warmupProblems.map((x) => `${name} ${x}`),
          ...problemsOf('floor', p.result).map((x) => x.replace(/^floor/, name)),
        );
        peers.push({
          name,
          result: p.result,
          throughputRatio: f.result.stats.rps ? p.result.stats.rps / f.result.stats.rps : 0,
          cpuPerRequestRatio: f.result.cpuUsPerRequest ? p.result.cpuUsPerRequest / f.result.cpuUsPerRequest : 0,
        });
        log(
          `${scenario.name}: ${name} ${Math.round(p.result.stats.rps)} req/s, ${Math.round(p.result.cpuUsPerRequest)} µs/req`,
        );
      }
      let rounds: Rounds | undefined;
      if (options.rounds > 1 && label === 'production') {
        const appSpec = {
          ...scenario.request(app.ready.url),
          expectBody: check.appBody,
          normalize: ignoreBudgetCountdown,
        };
        const floorSpec = { ...scenario.request(floor.ready.url), expectBody: check.floorBody };
        const once = (child: ServerChild, spec: LoadSpec) => async (): Promise<RoundSide> => {
          const m = await measure(child, spec, false);
          return { cpuUsPerRequest: m.result.cpuUsPerRequest, rps: m.result.stats.rps };
        };
        const sides: [string, () => Promise<RoundSide>][] = [
          ['app', once(app, appSpec)],
          ['floor', once(floor, floorSpec)],
        ];
        const first: Record<string, RoundSide> = {
          app: { cpuUsPerRequest: a.result.cpuUsPerRequest, rps: a.result.stats.rps },
          floor: { cpuUsPerRequest: f.result.cpuUsPerRequest, rps: f.result.stats.rps },
        };
        for (const [name, peer] of peerChildren) {
          const measured = peers.find((p) => p.name === name);
          if (!ROUND_PEERS.has(name) || !measured) continue;
          const expectBody = await checkPeer(scenario, name, peer.ready.url, check.floorBody);
          sides.push([
            name,
            once(peer, { ...scenario.request(peer.ready.url), expectBody, normalize: ignoreBudgetCountdown }),
          ]);
          first[name] = { cpuUsPerRequest: measured.result.cpuUsPerRequest, rps: measured.result.stats.rps };
        }
        rounds = await measureRounds(first, sides, options.rounds);
        const line = `${describeRounds(scenario.name, rounds)}\n  load average ${os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}`;
        abLines.push(line);
        log(line);
      }
      const result: ScenarioResult = {
        ...(peers.length ? { peers } : {}),
        ...(rounds ? { rounds } : {}),
        name: scenario.name,
        description: scenario.description,
        app: a.result,
        floor: f.result,
        throughputRatio: f.result.stats.rps ? a.result.stats.rps / f.result.stats.rps : 0,
        p99Ratio: f.result.stats.p99Ms ? a.result.stats.p99Ms / f.result.stats.p99Ms : 0,
        cpuPerRequestRatio: f.result.cpuUsPerRequest ? a.result.cpuUsPerRequest / f.result.cpuUsPerRequest : 0,
        identicalBodies: check.identical,
        problems: [
          ...a.warmupProblems.map((p) => `app ${p}`),
          ...f.warmupProblems.map((p) => `floor ${p}`),
          ...problemsOf('app', a.result),
          ...problemsOf('floor', f.result),
        ],
      };
      results.push(result);
      log(
        `${label} ${scenario.name}: app ${Math.round(a.result.stats.rps)} req/s, floor ${Math.round(f.result.stats.rps)} req/s ` +
          `(ratio ${result.throughputRatio.toFixed(2)}, CPU/request ${result.cpuPerRequestRatio.toFixed(2)}×)` +
          `${result.problems.length ? ' — FLAGGED' : ''}`,
      );
      if (a.result.profile) {
        const path = join(profileDir, `${label}-${scenario.name}.cpuprofile`);
        await rename(a.result.profile, path);
        profiles.push({
          scenario: `${label} ${scenario.name}`,
          path,
          summary: await summarizeProfile(path, 20),
          usPerRequest: a.result.cpuUsPerRequest,
        });
      }
    }
    return results;
  }
  const results = await runScenarios(app, options.production ? 'production' : 'development');
  const [shallow, deep] = ['orders-page-1', 'orders-page-10000'].map((n) => results.find((r) => r.name === n));
  if (shallow && deep) {
    log(
      `orders p50 at depth ${depth.depth.toLocaleString('en-US')} vs page 1: ${deep.app.stats.p50Ms.toFixed(2)} ms / ` +
        `${shallow.app.stats.p50Ms.toFixed(2)} ms = ${(deep.app.stats.p50Ms / shallow.app.stats.p50Ms).toFixed(2)}× (target ≤ 1.2×)`,
    );
  }
  const development = options.production && options.development ? await runScenarios(idpApp, 'development') : [];
  const cacheMix = mixChosen
    ? await runCacheMix({
        issuer,
        appEnv,
        floor,
        staffToken,
        writerToken: customerToken,
        list: all.find((s) => s.name === 'recentOrders-100')!,
        products: all.find((s) => s.name === 'products-get'),
      })
    : undefined;

  const meta = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    loadAverage: os.loadavg(),
    database: redacted(databaseUrl),
    redis: Boolean(process.env.REDIS_URL),
    orders: grown.after,
    recentOrdersPlan: plan,
    seconds: options.seconds,
    warmupSeconds: options.warmupSeconds,
    connections: options.connections,
    profiled: options.profile,
    compiled: options.compiled,
    appMode: options.production ? 'production (external issuer)' : 'development (embedded IdP)',
  };
  console.log(
    `\nOrders API vs. floor (node:http + pg, same SQL) — ${meta.orders.toLocaleString('en-US')} orders, ` +
      `${options.connections} connections, ${options.seconds} s per run, ${meta.cpus} CPUs, Node ${meta.node}, ` +
      `app in ${meta.appMode}, ${options.compiled ? 'compiled (dist/)' : 'from the sources (tsx)'}` +
      (options.profile ? ' — PROFILED, app numbers are slowed by the profiler' : ''),
  );
  console.log(renderTables(results));
  if (development.length) {
    console.log(
      '\nSecondary: the development instance (NODE_ENV=development, serving the embedded IdP the bench signs in ' +
        "with: graphql-js instanceOf checks and oidc-provider's promise hooks), against the same floor",
    );
    console.log(renderTables(development));
  }
  if (cacheMix) console.log(`\n${renderMix(cacheMix)}`);
  for (const p of profiles) console.log(`\n${renderProfile(p.scenario, p.path, p.summary, p.usPerRequest)}`);

  if (abLines.length) console.log(`\n${abLines.join('\n')}`);
  let exitCode = 0;
  const failures: string[] = [];
  if (peerProblems.length) console.log(`\nPeers FLAGGED: ${peerProblems.join('; ')}`);
  if (options.minRatio !== undefined) {
    for (const r of results) {
      if (r.throughputRatio < options.minRatio) {
        failures.push(`${r.name}: throughput ratio ${r.throughputRatio.toFixed(2)} is below ${options.minRatio}`);
      }
      if (r.problems.length) failures.push(`${r.name}: the run had errors`);
    }
  }
  const baselineFile = join(resultsDir, 'baseline.json');
  if (options.check) failures.push(...(await checkAgainstBaseline(baselineFile, results)));
  if (options.check || options.minRatio !== undefined) {
    console.log(failures.length ? `\nCHECK FAILED:\n  ${failures.join('\n  ')}` : '\nCheck passed.');
    if (failures.length) exitCode = 1;
  }
  if (options.writeBaseline) {
    const commit = (() => {
      try {
        return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
      } catch {
        return undefined;
      }
    })();
    await mkdir(resultsDir, { recursive: true });
    await writeBaseline(baselineFile, baselineOf(results, commit));
    log(`baseline written to ${baselineFile}`);
  }
  for (const [, child] of peerChildren) await child.stop();
  if (options.peers) {
    let fanout: FanoutFigures | null = null;
    if (options.withFanout) {
      await cleanup();
      const fan = await import('./fanout.js');
      const code = await fan.runFanout(options.compiled ? [] : ['--tsx']);
      const r = fan.lastResult;
      if (code) exitCode = exitCode || code;
      if (r) {
        fanout = {
          date: r.meta.date,
          loadAverage: r.meta.loadAverage,
          compiled: r.meta.compiled,
          appMsPerEvent: r.cpu.serverMsPerEvent,
          floorMsPerEvent: r.floor.userMsPerEvent + r.floor.systemMsPerEvent,
          appLastP99Ms: r.perEventMs.lastDeliveryP99,
          floorLastP99Ms: r.floor.lastDeliveryP99Ms,
        };
      }
    }
    console.log(`\n${renderTargets(results, fanout)}`);
  }

  await mkdir(resultsDir, { recursive: true });
  const file = join(resultsDir, 'latest.json');
  await writeFile(
    file,
    JSON.stringify(
      {
        meta,
        results,
        development,
        ...(cacheMix ? { cacheMix } : {}),
        profiles,
        ...(options.check || options.minRatio !== undefined ? { check: { minRatio: options.minRatio, failures } } : {}),
      },
      null,
      2,
    ) + '\n',
  );
  log(`results written to ${file}`);
  return exitCode;
}

const unreachable = await postgresProblem(databaseUrl, redacted(databaseUrl));
if (unreachable) {
  console.error(`[bench] ${unreachable}`);
  process.exit(1);
}

const exitCode = await main().catch((error: unknown) => {
  console.error(`[bench] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  return 1;
});
await cleanup();
process.exit(exitCode);
