/**
 * `npm run bench -- --abuse`: each hostile document from issue #10, sent for `--seconds` (30) while
 * normal traffic and a `/healthz` probe run beside it, against the real app on PostgreSQL.
 *
 * Per hostile document it reports: whether every answer was the expected refusal; the server's time
 * to refuse one, measured alone first (CPU µs per request in the server process over 200 sequential
 * requests, and their p50 latency); then under load, the hostile requests' p50/p99, the normal
 * traffic's rate and p99, and `/healthz` p99. Targets: every refusal under 5 ms, `/healthz` p99
 * under 50 ms. Results go to bench/results/abuse.json.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { getIntrospectionQuery } from 'graphql';
import { loginWithPkce } from '../src/auth/pkceLogin.js';
import { cleanupOnce, startChild } from './children.js';
import type { CpuTime } from './ipc.js';

interface Hostile {
  name: string;
  who: 'alice' | 'carol' | 'anonymous';
  body: Record<string, unknown>;
  /** The `errors[0].extensions.code` a refusal carries (null: the request runs, but must not be stored). */
  code: string | null;
}

const chained = (levels: number) =>
  `{ recentOrders(first: 1) { customer { ...F0 } } } ` +
  Array.from({ length: levels }, (_, i) =>
    i === levels - 1
      ? `fragment F${i} on Customer { id }`
      : `fragment F${i} on Customer { id orders(first: 1) { customer { ...F${i + 1} } } ...F${i + 1} }`,
  ).join(' ');
const aliased = (n: number, field: string, op = '') =>
  `${op}{ ${Array.from({ length: n }, (_, i) => `a${i}: ${field}`).join(' ')} }`;
const bigApq = `{ __typename } #${'x'.repeat(90 * 1024)}`;

const HOSTILE: Hostile[] = [
  {
    name: '143-byte fan-out (customer token)',
    who: 'alice',
    code: 'QUERY_TOO_COMPLEX',
    body: {
      query:
        '{ recentOrders(first:100) { customer { orders(first:100) { customer { orders(first:100) { customer { orders(first:100) { id }}}}}}}}',
    },
  },
  {
    name: 'chained fragments, 30 levels (anonymous)',
    who: 'anonymous',
    code: 'GRAPHQL_VALIDATION_FAILED',
    body: { query: chained(30) },
  },
  {
    name: '1,000 aliases of recentOrders(first:100)',
    who: 'carol',
    code: 'GRAPHQL_PARSE_FAILED',
    body: { query: aliased(1000, 'recentOrders(first:100) { id }') },
  },
  {
    name: '200 aliased createOrder',
    who: 'alice',
    code: 'GRAPHQL_PARSE_FAILED',
    body: { query: aliased(200, 'createOrder(input: { items: [{ sku: "KB-001", qty: 1 }] }) { id }', 'mutation ') },
  },
  {
    name: 'introspection with nested lists (anonymous)',
    who: 'anonymous',
    code: 'GRAPHQL_VALIDATION_FAILED',
    body: {
      query: '{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }',
    },
  },
  {
    name: '90 KB APQ registration (anonymous)',
    who: 'anonymous',
    code: null,
    body: {
      query: bigApq,
      extensions: { persistedQuery: { version: 1, sha256Hash: createHash('sha256').update(bigApq).digest('hex') } },
    },
  },
];

const NORMAL = { query: '{ recentOrders(first: 20) { id status customer { id name } } }' };
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
};
const cpuUs = (t: CpuTime) => t.user + t.system;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function post(url: string, body: unknown, token?: string) {
  const started = performance.now();
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { errors?: { extensions?: { code?: string } }[] };
  return { ms: performance.now() - started, code: json.errors?.[0]?.extensions?.code ?? null, status: res.status };
}

/** Sequential requests until `until`, on `lanes` concurrent lanes. */
async function loop(lanes: number, until: number, once: () => Promise<number | null>) {
  const times: number[] = [];
  let failures = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (performance.now() < until) {
        const ms = await once();
        if (ms === null) failures++;
        else times.push(ms);
      }
    }),
  );
  return { times, failures };
}

export async function runAbuse(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { seconds: { type: 'string', default: '30' } } });
  const seconds = Math.min(300, Math.max(1, Number(values.seconds) || 30));
  const log = (message: string) => console.error(`[abuse] ${message}`);
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  const cleanup = cleanupOnce({ databaseUrl, schema, log });
  try {
    // The budget is measured by the tests; here it would only refuse the normal traffic.
    const app = await startChild('app', './appServer.ts', {
      DATABASE_URL: databaseUrl,
      DATABASE_SCHEMA: schema,
      REDIS_URL: process.env.REDIS_URL,
      RATE_LIMIT_POINTS: '1000000000',
    });
    const url = app.ready.url;
    const login = async (user: string) =>
      (await loginWithPkce({ issuer: app.ready.issuer!, username: user, password: user })).accessToken;
    const tokens = { alice: await login('alice'), carol: await login('carol'), anonymous: undefined };
    const introspection = await post(url, { query: getIntrospectionQuery() });
    log(`app at ${url}; getIntrospectionQuery() in development: ${introspection.code ?? 'ok'}`);

    const rows = [];
    for (const hostile of HOSTILE) {
      const token = tokens[hostile.who];
      const send = async () => {
        const r = await post(url, hostile.body, token);
        return r.code === hostile.code && r.status < 500 ? r.ms : null;
      };
      // Alone: the server's own cost of one refusal.
      const cpuBefore = cpuUs(await app.cpu());
      const alone: number[] = [];
      let wrong = 0;
      for (let i = 0; i < 200; i++) {
        const ms = await send();
        if (ms === null) wrong++;
        else alone.push(ms);
      }
      const cpuPerRequestUs = (cpuUs(await app.cpu()) - cpuBefore) / 200;

      log(`${hostile.name}: alone ${cpuPerRequestUs.toFixed(0)} µs CPU/request; ${seconds} s under load…`);
      const until = performance.now() + seconds * 1000;
      const [attack, normal, health] = await Promise.all([
        loop(2, until, send),
        loop(2, until, async () => {
          const r = await post(url, NORMAL, tokens.carol);
          return r.code === null && r.status === 200 ? r.ms : null;
        }),
        loop(1, until, async () => {
          const started = performance.now();
          const res = await fetch(`${url}/healthz`);
          await res.arrayBuffer();
          const ms = performance.now() - started;
          await sleep(50);
          return res.status === 200 ? ms : null;
        }),
      ]);
      rows.push({
        name: hostile.name,
        expected: hostile.code ?? 'runs, not stored',
        allAsExpected: wrong === 0 && attack.failures === 0,
        aloneCpuUsPerRequest: Math.round(cpuPerRequestUs),
        aloneP50Ms: percentile(alone, 50),
        underLoad: {
          sent: attack.times.length + attack.failures,
          p50Ms: percentile(attack.times, 50),
          p99Ms: percentile(attack.times, 99),
        },
        normal: { rps: normal.times.length / seconds, p99Ms: percentile(normal.times, 99), failures: normal.failures },
        healthz: { p99Ms: percentile(health.times, 99), maxMs: Math.max(...health.times), failures: health.failures },
      });
    }

    const f = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(0));
    console.log(
      '| hostile document | refused as | all as expected | server CPU per refusal (alone) | p50 alone ms | under load: sent, p50 / p99 ms | normal traffic req/s, p99 ms | `/healthz` p99 / max ms |',
    );
    console.log('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |');
    for (const r of rows) {
      console.log(
        `| ${r.name} | \`${r.expected}\` | ${r.allAsExpected ? 'yes' : 'NO'} | ${f(r.aloneCpuUsPerRequest / 1000)} ms | ${f(r.aloneP50Ms)} | ${r.underLoad.sent}, ${f(r.underLoad.p50Ms)} / ${f(r.underLoad.p99Ms)} | ${r.normal.rps.toFixed(0)}, ${f(r.normal.p99Ms)} | ${f(r.healthz.p99Ms)} / ${f(r.healthz.maxMs)} |`,
      );
    }
    await mkdir(new URL('./results/', import.meta.url), { recursive: true });
    await writeFile(new URL('./results/abuse.json', import.meta.url), JSON.stringify({ seconds, rows }, null, 2));
    return rows.every((r) => r.allAsExpected) ? 0 : 1;
  } finally {
    await cleanup();
  }
}
