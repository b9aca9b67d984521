import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Why a request or stream was turned away before any work: the protections, by name. */
export type RefusalReason = 'rate_budget' | 'query_cost' | 'query_limits' | 'stream_limit';

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    httpRequests: new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by route group, method and status.',
      labelNames: ['route', 'method', 'status'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by route group.',
      labelNames: ['route'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    // GraphQL reports most failures inside a 200 response, so they are counted on their own.
    graphqlErrors: new Counter({
      name: 'graphql_errors_total',
      help: 'Errors in GraphQL responses by extensions.code.',
      labelNames: ['code'] as const,
      registers: [registry],
    }),
    sqlStatements: new Counter({
      name: 'sql_statements_total',
      help: 'SQL statements sent to the database.',
      registers: [registry],
    }),
    graphqlOperations: new Counter({
      name: 'graphql_operations_total',
      help: 'GraphQL operations admitted to run, by type, on every transport.',
      labelNames: ['type'] as const,
      registers: [registry],
    }),
    subscriptionExecutions: new Counter({
      name: 'graphql_subscription_executions_total',
      help: 'Executions of subscription events: `shared` once for a whole group of subscribers, `own` per subscriber.',
      labelNames: ['sharing'] as const,
      registers: [registry],
    }),
    slowSubscribers: new Counter({
      name: 'graphql_subscribers_too_slow_total',
      help: 'Subscribers cut off because too many results waited for them (WebSocket close 1008, SSE stream ended).',
      registers: [registry],
    }),
    openSubscriptions: new Gauge({
      name: 'graphql_subscriptions_open',
      help: 'GraphQL subscriptions open on this replica (WebSocket and SSE).',
      registers: [registry],
    }),
    refusals: new Counter({
      name: 'refusals_total',
      help: 'Requests and streams refused by a protection before any work, by reason.',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Bounded label values: a route group, never the raw path with its ids. */
function routeGroup(path: string): string {
  const match = /^\/(graphql|v1\/orders|v1|idp|auth|healthz|readyz)(?=\/|$)/.exec(path);
  return match ? `/${match[1]}` : 'other';
}

export function recordRequests(metrics: Metrics) {
  // Label children are bound once per label value and kept, so a request costs counter increments only,
  // not label objects and their lookups (the label values are bounded: route groups, methods, statuses).
  const durations = new Map<string, ReturnType<Metrics['httpDuration']['labels']>>();
  const counts = new Map<string, ReturnType<Metrics['httpRequests']['labels']>>();
  const durationOf = (route: string) => {
    let child = durations.get(route);
    if (!child) durations.set(route, (child = metrics.httpDuration.labels(route)));
    return child;
  };
  const countOf = (route: string, method: string, status: number) => {
    const key = `${route} ${method} ${status}`;
    let child = counts.get(key);
    if (!child) counts.set(key, (child = metrics.httpRequests.labels(route, method, String(status))));
    return child;
  };
  return (req: Request, res: Response, next: NextFunction) => {
    // originalUrl, because routers rewrite req.path to be relative to where they are mounted.
    const route = routeGroup(req.originalUrl.split('?')[0]!);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      durationOf(route).observe(Number(process.hrtime.bigint() - started) / 1e9);
      countOf(route, req.method, res.statusCode).inc();
    });
    next();
  };
}

/**
 * GET /metrics on a port of its own, never the public one: operators scrape it from inside the network and the
 * balancer does not forward to it. Anything else there is a 404.
 */
export async function serveMetrics(metrics: Metrics, host: string, port: number) {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
      res.end('Only GET /metrics is served here.\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'Content-Type': metrics.registry.contentType, 'Cache-Control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      () => {
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
        res.end('Collecting metrics failed.\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shown = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  return {
    url: `http://${shown}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
