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
 *      again every second; RSS sampled every 10 s, and its growth after the first minute's warm-up.
 *
 *   npm run bench -- --topology [--websockets 5000] [--sse 1000] [--per-address 20] [--soak 600]
 */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loginWithPkce } from '../src/auth/pkceLogin.js';
import { openDevices, sseDevice, wsDevice, type Device } from '../__tests__/helpers/devices.js';
import { freePort, startPostgres, startRedis } from '../__tests__/helpers/infra.js';
import { behindBalancerEnv, startNginx } from '../__tests__/helpers/nginx.js';
import { startReplica, type Replica } from '../__tests__/helpers/replica.js';
import { placeOrder } from './data.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const log = (message: string) => console.error(`[topology] ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

async function rssOf(replica: Replica): Promise<number> {
  const status = await readFile(`/proc/${replica.child.pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) * 1024;
}

const quantile = (sorted: readonly number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

export async function runTopology(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      websockets: { type: 'string', default: '5000' },
      sse: { type: 'string', default: '1000' },
      'per-address': { type: 'string', default: '20' },
      soak: { type: 'string', default: '600' },
      tsx: { type: 'boolean', default: false },
    },
  });
  const websockets = Number(values.websockets);
  const sseStreams = Number(values.sse);
  const perAddress = Number(values['per-address']);
  const soakSeconds = Number(values.soak);

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
    const [balancerPort, p1, p2] = await Promise.all([freePort(), freePort(), freePort()]);
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
    const replicas = [await startReplica(env, { port: p1, ...build })];
    replicas.push(await startReplica(env, { port: p2, ...build }));
    cleanups.push(() => Promise.all(replicas.map((r) => r.stop())));
    const nginx = await startNginx({ port: balancerPort, upstreams: [p1, p2] });
    cleanups.push(() => nginx.stop());
    const { accessToken: token } = await loginWithPkce({
      issuer: `${issuer.url}/idp`,
      username: 'alice',
      password: 'alice',
    });
    log(`two production replicas behind nginx at ${nginx.url}; load ${os.loadavg().map((l) => l.toFixed(2))}`);

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
      const samples: { at: number; rss: number }[] = [];
      const start = performance.now();
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
        if (tick % 10 === 0) samples.push({ at: (performance.now() - start) / 1000, rss: await rss() });
        await sleep(1000);
      }
      await sleep(3000);
      const live = devices.filter((d) => d.acknowledgedAt && !d.refused).length;
      const warm = samples.find((s) => s.at >= 60) ?? samples[0]!;
      const end = samples.at(-1)!;
      const peak = Math.max(...samples.filter((s) => s.at >= warm.at).map((s) => s.rss));
      console.log(
        `soak ${soakSeconds} s: ${orders} orders, ${reconnects} reconnects, ${live} of ${devices.length} devices live at the end; ` +
          `RSS ${mb(warm.rss)} MB after warm-up (${warm.at.toFixed(0)} s) → ${mb(end.rss)} MB at the end ` +
          `(${(((end.rss - warm.rss) / warm.rss) * 100).toFixed(1)} %, target ≤ 5 %), peak ${mb(peak)} MB`,
      );
      console.log(`soak RSS samples (s: MB): ${samples.map((s) => `${s.at.toFixed(0)}: ${mb(s.rss)}`).join(', ')}`);
    }
    console.log(
      `load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} on ${os.cpus().length} cores`,
    );
    for (const d of devices) d.close();
    return 0;
  } catch (error) {
    console.error(error);
    return 1;
  } finally {
    await cleanup();
  }
}
