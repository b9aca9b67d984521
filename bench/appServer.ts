/**
 * Child process: the real Orders API, started in-process exactly as src/main.ts would, on the
 * bench's PostgreSQL schema, with silent logging so the numbers measure the API, not the terminal.
 *
 * By default it runs with NODE_ENV=development, because production requires an external OIDC issuer
 * and this instance's embedded IdP is what the bench signs in with. Given BENCH_OIDC_ISSUER (the
 * first instance's `/idp`), it runs as production does instead: a second replica that trusts that
 * issuer, with no embedded IdP of its own (see docs/auth.md).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { subscribe } from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import type * as ConfigModule from '../src/config/index.js';
import type * as ServerModule from '../src/server.js';
import { reportFailure, serveParent, type MemoryReading } from './ipc.js';
import { createProfiler } from './profiler.js';

/**
 * Memory now, after full collections when the child was started with --expose-gc (the fan-out
 * bench does): twice, with a turn of the event loop between, so that what the first one freed
 * by finalizers is gone too.
 */
async function memory(): Promise<MemoryReading> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  const { rss, heapTotal, heapUsed, external, arrayBuffers } = process.memoryUsage();
  return { rss, heapTotal, heapUsed, external, arrayBuffers, collected: Boolean(gc) };
}

try {
  // BENCH_COMPILED runs the build in dist/ (`npm run build`), as production does. From the sources, tsx gives every
  // named closure a `name` property (esbuild's keepNames), which costs memory per closure that production never pays.
  // BENCH_DIST: the build to run, as an absolute path (the bench sets it to this checkout's dist/src/, or with
  // --compare another checkout's); without it, BENCH_COMPILED means ../dist/src from here.
  const from = process.env.BENCH_DIST
    ? pathToFileURL(process.env.BENCH_DIST).href.replace(/\/$/, '')
    : process.env.BENCH_COMPILED
      ? '../dist/src'
      : '../src';
  const { loadConfig } = (await import(`${from}/config/index.js`)) as typeof ConfigModule;
  const { startServer } = (await import(`${from}/server.js`)) as typeof ServerModule;
  const externalIssuer = process.env.BENCH_OIDC_ISSUER;
  const config = loadConfig({
    NODE_ENV: externalIssuer ? 'production' : 'development',
    PORT: '0',
    HOST: '127.0.0.1',
    METRICS_PORT: '0',
    LOG_LEVEL: 'silent',
    DATABASE_URL: process.env.DATABASE_URL,
    DATABASE_SCHEMA: process.env.DATABASE_SCHEMA,
    ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}),
    // The bench measures throughput from a few users; the rate budget would refuse most of it.
    RATE_LIMIT_POINTS: process.env.RATE_LIMIT_POINTS ?? '1000000000',
    // The result-cache mix runs a replica of its own with RESULT_CACHE=on.
    ...(process.env.RESULT_CACHE ? { RESULT_CACHE: process.env.RESULT_CACHE } : {}),
    // The tracing bench's replicas: OpenTelemetry's standard variables, as the process was given them.
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('OTEL_'))),
    // The webhook bench's replica: its WEBHOOK_* settings, as the process was given them.
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('WEBHOOK_'))),
    // The fan-out bench opens thousands of WebSockets from one address.
    ...(process.env.WS_MAX_PER_IP ? { WS_MAX_PER_IP: process.env.WS_MAX_PER_IP } : {}),
    // How often the app pings its WebSockets, for measuring what the pings cost (`WS_KEEPALIVE_S=3600 … --fanout`).
    ...(process.env.WS_KEEPALIVE_S ? { WS_KEEPALIVE_S: process.env.WS_KEEPALIVE_S } : {}),
    ...(process.env.HTTP_MAX_CONNECTIONS_PER_IP
      ? { HTTP_MAX_CONNECTIONS_PER_IP: process.env.HTTP_MAX_CONNECTIONS_PER_IP }
      : {}),
    ...(externalIssuer
      ? {
          OIDC_ISSUER: externalIssuer,
          OIDC_CLIENT_ID: 'orders-web',
          OIDC_CLIENT_SECRET: 'orders-web-secret',
          OIDC_ALLOW_HTTP: 'true',
        }
      : {}),
  });
  const running = await startServer(config, pino({ level: 'silent' }));
  // SQL statements sent on behalf of /graphql requests, apart from the process's background work (the outbox poll, the
  // sweeper, /metrics' own queries), which sql_statements_total counts too: node:http publishes each request just
  // before handing it to the app, and what the app then does runs in that request's async context.
  const inRequest = new AsyncLocalStorage<boolean>();
  let requestStatements = 0;
  const counted = running.app.db.onStatement;
  running.app.db.onStatement = () => {
    counted?.();
    if (inRequest.getStore()) requestStatements++;
  };
  subscribe('http.server.request.start', (message) => {
    inRequest.enterWith((message as { request: IncomingMessage }).request.url?.startsWith('/graphql') ?? false);
  });
  const profiler = process.env.BENCH_PROFILE_DIR ? createProfiler(process.env.BENCH_PROFILE_DIR) : null;
  serveParent({ url: running.url, metricsUrl: running.metricsUrl, issuer: running.app.issuer }, () => running.close(), {
    memory,
    'request-statements': async () => requestStatements,
    ...(profiler ? { 'profile-start': profiler.start, 'profile-stop': profiler.stop } : {}),
  });
} catch (error) {
  reportFailure(error);
}
