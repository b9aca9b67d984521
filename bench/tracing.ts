/**
 * `npm run bench -- --tracing`: what tracing costs. Three production replicas on the same PostgreSQL schema, side by
 * side in one run: tracing off (no OTLP endpoint), on at 100 % sampling, and on at 1 % (parentbased_traceidratio
 * 0.01), both exporting OTLP/HTTP protobuf to a local receiver in this process. For the list of 100 (staff) and one
 * order by id (its owner), each replica gets the same closed-loop runs, interleaved round by round so that the
 * machine's load falls on all three alike; the figure compared is the server's CPU per request (user + system, read
 * in the replica's own process), the median over rounds. Targets (issue 26): ≤ 15 % more CPU per request at 100 %,
 * ≤ 3 % at 1 %. The load average is printed beside it: the machine is shared.
 *
 * With --profile, each replica is CPU-profiled for one more run of each scenario after the measured rounds (the
 * rounds' figures stay unprofiled); the summaries are printed and the profiles kept in bench/results/profiles/.
 *
 *   npm run bench -- --tracing [--rounds 5] [--requests 1500] [--connections 8] [--profile]
 */
import { randomBytes } from 'node:crypto';
import { rename } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loginWithPkce } from '../src/auth/pkceLogin.js';
import { cleanupOnce, startChild, type ServerChild } from './children.js';
import { connect, customerIdOf, someOrderOf } from './data.js';
import type { CpuTime } from './ipc.js';
import { runLoad } from './load.js';
import { renderProfile, summarizeProfile } from './profile.js';
import { scenarios } from './scenarios.js';

const cpuMicros = (t: CpuTime) => t.user + t.system;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** A local OTLP receiver: it reads each export whole and answers success, counting what it got. */
async function otlpSink() {
  let requests = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => {
      requests += 1;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stats: () => ({ requests, bytes }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export async function runTracing(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string', default: '5' },
      requests: { type: 'string', default: '1500' },
      connections: { type: 'string', default: '8' },
      profile: { type: 'boolean', default: false },
    },
  });
  const rounds = Math.max(1, Number(values.rounds) || 5);
  const amount = Math.max(100, Number(values.requests) || 1500);
  const connections = Math.max(1, Number(values.connections) || 8);
  const profileDir = fileURLToPath(new URL('./results/profiles/', import.meta.url));
  const profiles: string[] = [];
  const log = (message: string) => console.error(`[tracing] ${message}`);
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  const sink = await otlpSink();
  const cleanup = cleanupOnce({ databaseUrl, schema, log, first: () => sink.close() });
  const loadAtStart = loadavg();
  try {
    const base = { DATABASE_URL: databaseUrl, DATABASE_SCHEMA: schema, REDIS_URL: process.env.REDIS_URL };
    // The identity provider runs in an instance of its own (development): oidc-provider's AsyncLocalStorage would
    // cost the measured replicas CPU that production, with an external issuer, never pays.
    const idp = await startChild('idp', './appServer.ts', base);
    const issuer = idp.ready.issuer!;
    const login = async (user: string) => (await loginWithPkce({ issuer, username: user, password: user })).accessToken;
    const [staffToken, customerToken] = [await login('carol'), await login('alice')];
    const client = await connect(databaseUrl, schema);
    const customerOrderId = await someOrderOf(client, await customerIdOf(client, 'alice'));
    await client.end();

    const replica = (env: Record<string, string>) =>
      startChild('app', './appServer.ts', {
        ...base,
        BENCH_OIDC_ISSUER: issuer,
        ...(values.profile ? { BENCH_PROFILE_DIR: profileDir } : {}),
        ...env,
      });
    const traced = { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio' };
    const sides: { name: string; child: ServerChild }[] = [
      { name: 'off', child: await replica({}) },
      { name: 'on, 100 %', child: await replica({ ...traced, OTEL_TRACES_SAMPLER_ARG: '1' }) },
      { name: 'on, 1 %', child: await replica({ ...traced, OTEL_TRACES_SAMPLER_ARG: '0.01' }) },
    ];
    const chosen = scenarios({ staffToken, customerToken, customerOrderId, deepCursor: '', since: '' }).filter((s) =>
      ['recentOrders-100', 'order-by-id'].includes(s.name),
    );

    const rows: string[] = [];
    for (const scenario of chosen) {
      const cpu: Record<string, number[]> = Object.fromEntries(sides.map((s) => [s.name, []]));
      const rps: Record<string, number[]> = Object.fromEntries(sides.map((s) => [s.name, []]));
      for (const side of sides) await runLoad(scenario.request(side.child.ready.url), { connections, seconds: 2 });
      for (let round = 0; round < rounds; round++) {
        for (const side of sides) {
          const before = cpuMicros(await side.child.cpu());
          const stats = await runLoad(scenario.request(side.child.ready.url), { connections, seconds: 5, amount });
          const used = cpuMicros(await side.child.cpu()) - before;
          if (stats.non2xx || stats.errors)
            throw new Error(`${side.name}: ${stats.non2xx} non-2xx, ${stats.errors} errors`);
          cpu[side.name]!.push(used / stats.responses);
          rps[side.name]!.push(stats.rps);
        }
        log(
          `${scenario.name} round ${round + 1}/${rounds}: ${sides.map((s) => `${s.name} ${Math.round(cpu[s.name]!.at(-1)!)} µs`).join(', ')}`,
        );
      }
      if (values.profile) {
        for (const side of sides) {
          await side.child.request('profile-start');
          await runLoad(scenario.request(side.child.ready.url), { connections, seconds: 5, amount });
          const path = join(profileDir, `tracing-${side.name.replace(/\W+/g, '')}-${scenario.name}.cpuprofile`);
          await rename((await side.child.request('profile-stop')) as string, path);
          profiles.push(
            renderProfile(`${scenario.name}, tracing ${side.name}`, path, await summarizeProfile(path, 25)),
          );
        }
      }
      const off = median(cpu.off!);
      for (const side of sides) {
        const us = median(cpu[side.name]!);
        const change = side.name === 'off' ? '—' : `${us >= off ? '+' : ''}${((100 * (us - off)) / off).toFixed(1)} %`;
        const target = side.name === 'on, 100 %' ? '≤ +15 %' : side.name === 'on, 1 %' ? '≤ +3 %' : '';
        const met = target ? (us <= off * (side.name === 'on, 100 %' ? 1.15 : 1.03) ? 'yes' : 'no') : '';
        rows.push(
          `| ${scenario.name} | ${side.name} | ${Math.round(us)} | ${change} | ${target} | ${met} | ${Math.round(median(rps[side.name]!))} | ${cpu[side.name]!.map((v) => Math.round(v)).join(', ')} |`,
        );
      }
    }
    const exported = sink.stats();
    console.log(
      `load average ${loadAtStart.map((l) => l.toFixed(1)).join(' / ')} at the start, ${loadavg()
        .map((l) => l.toFixed(1))
        .join(
          ' / ',
        )} at the end; ${rounds} rounds of ${amount} requests, ${connections} connections; the receiver got ${exported.requests} exports (${(exported.bytes / 2 ** 20).toFixed(1)} MiB)`,
    );
    console.log(
      '| scenario | tracing | CPU µs/req (median) | vs off | target | met | req/s (median) | CPU µs/req per round |',
    );
    console.log('| --- | --- | ---: | ---: | --- | --- | ---: | --- |');
    for (const row of rows) console.log(row);
    for (const profile of profiles) console.log(`\n${profile}`);
    return 0;
  } finally {
    await cleanup();
  }
}
