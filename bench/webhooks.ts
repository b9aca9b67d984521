/**
 * `npm run bench -- --webhooks`: webhook deliveries from a production replica to a receiver in this process, on
 * PostgreSQL, at 1 and at 100 endpoints. For each count:
 *
 * - throughput: a burst of orders placed as fast as 16 clients can (REST), then every message they make delivered;
 *   deliveries per second from the first order sent to the last delivery received, and the replica's CPU per
 *   delivery;
 * - latency: orders placed at a steady, light pace; from commit to delivery, p50 and p99. The start is the order's
 *   `created_at`, taken just before its transaction, so the figure slightly overstates commit to delivery.
 *
 * The endpoints (owned by staff, so that every order reaches all of them) are written straight into the schema: the
 * API allows 20 per owner and the embedded IdP has three users. The receiver answers 204 at once.
 *
 *   npm run bench -- --webhooks [--burst 2000] [--seconds 5]
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { loginWithPkce } from '../src/auth/pkceLogin.js';
import { cleanupOnce, startChild } from './children.js';
import { connect, placeOrder } from './data.js';
import type { CpuTime } from './ipc.js';

const cpuMicros = (t: CpuTime) => t.user + t.system;
const percentile = (sorted: readonly number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;

/** The receiver: answers 204 at once and notes, per webhook-id, when its first request arrived and what it was about. */
async function receiver() {
  const arrivals = new Map<string, { at: number; createdAt: number }>();
  let requests = 0;
  let wake: (() => void) | null = null;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests++;
      const at = Date.now();
      const id = String(req.headers['webhook-id']);
      if (!arrivals.has(id)) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data: { order: { created_at: string } } };
        arrivals.set(id, { at, createdAt: Date.parse(body.data.order.created_at) });
      }
      res.writeHead(204).end();
      wake?.();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrivals,
    requests: () => requests,
    reset() {
      arrivals.clear();
      requests = 0;
    },
    /** Resolves once `count` distinct messages have arrived (or rejects after `timeoutMs`). */
    until(count: number, timeoutMs: number) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`only ${arrivals.size} of ${count} messages arrived within ${timeoutMs} ms`)),
          timeoutMs,
        );
        const check = () => {
          if (arrivals.size < count) return;
          clearTimeout(timer);
          wake = null;
          resolve();
        };
        wake = check;
        check();
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export async function runWebhooks(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { burst: { type: 'string', default: '2000' }, seconds: { type: 'string', default: '5' } },
  });
  const burst = Math.max(100, Number(values.burst) || 2000);
  const seconds = Math.max(2, Number(values.seconds) || 5);
  const log = (message: string) => console.error(`[webhooks] ${message}`);
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  const hooks = await receiver();
  const cleanup = cleanupOnce({ databaseUrl, schema, log, first: () => hooks.close() });
  const loadAtStart = loadavg();
  try {
    const base = { DATABASE_URL: databaseUrl, DATABASE_SCHEMA: schema, REDIS_URL: process.env.REDIS_URL };
    // The IdP's instance sends no webhooks: the measured replica runs as production does, its issuer another process.
    const idp = await startChild('idp', './appServer.ts', { ...base, WEBHOOK_CONCURRENCY: '0' });
    const issuer = idp.ready.issuer!;
    const token = (await loginWithPkce({ issuer, username: 'alice', password: 'alice' })).accessToken;
    const app = await startChild('app', './appServer.ts', {
      ...base,
      BENCH_OIDC_ISSUER: issuer,
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_POLL_MS: '1000',
    });
    const db = await connect(databaseUrl, schema);

    const place = () => placeOrder(app.ready.url, token);

    const rows: string[] = [];
    for (const endpoints of [1, 100]) {
      await db.query('delete from webhook_endpoints');
      const now = new Date().toISOString();
      for (let i = 0; i < endpoints; i++) {
        await db.query(
          `insert into webhook_endpoints (id, owner_subject, owner_customer_id, owner_staff, url, events, secret,
             owner_roles_at, created_at, updated_at)
           values ($1, $2, 'cus_bench', true, $3, '["order.created"]', $4, $5, $5, $5)`,
          [
            `we_bench${String(i).padStart(22, '0')}`,
            `bench-${i}`,
            `${hooks.url}/e/${i}`,
            `whsec_${randomBytes(32).toString('base64')}`,
            now,
          ],
        );
      }

      // Throughput: a burst of orders, every message delivered.
      const orders = endpoints === 1 ? burst : Math.max(10, Math.round(burst / endpoints) * 2);
      hooks.reset();
      const cpuBefore = cpuMicros(await app.cpu());
      const started = Date.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < orders) {
            next++;
            await place();
          }
        }),
      );
      await hooks.until(orders * endpoints, 300_000);
      const elapsed = (Math.max(...[...hooks.arrivals.values()].map((a) => a.at)) - started) / 1000;
      const cpuPerDelivery = (cpuMicros(await app.cpu()) - cpuBefore) / (orders * endpoints);
      const throughput = (orders * endpoints) / elapsed;
      const burstLatency = [...hooks.arrivals.values()].map((a) => a.at - a.createdAt).sort((a, b) => a - b);
      log(`${endpoints} endpoint(s): ${orders * endpoints} deliveries in ${elapsed.toFixed(1)} s`);

      // Latency: a steady, light pace of orders.
      hooks.reset();
      const perSecond = endpoints === 1 ? 20 : 2;
      const paced = perSecond * seconds;
      for (let i = 0; i < paced; i++) {
        const due = Date.now() + 1000 / perSecond;
        await place();
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
      }
      await hooks.until(paced * endpoints, 120_000);
      const latency = [...hooks.arrivals.values()].map((a) => a.at - a.createdAt).sort((a, b) => a - b);
      rows.push(
        `| ${endpoints} | ${orders} orders → ${orders * endpoints} | ${Math.round(throughput)} | ${Math.round(cpuPerDelivery)} | ${percentile(burstLatency, 99)} | ${perSecond} orders/s → ${perSecond * endpoints}/s | ${percentile(latency, 50)} | ${percentile(latency, 99)} | ${hooks.requests() - hooks.arrivals.size} |`,
      );
    }
    await db.end();
    console.log(
      `load average ${loadAtStart.map((l) => l.toFixed(1)).join(' / ')} at the start, ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' / ')} at the end`,
    );
    console.log(
      '| endpoints | burst | deliveries/s | CPU µs/delivery | burst p99 ms (commit → delivery) | steady pace | p50 ms | p99 ms | repeats |',
    );
    console.log('| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |');
    for (const row of rows) console.log(row);
    return 0;
  } finally {
    await cleanup();
  }
}
