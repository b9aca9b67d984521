import type { NextFunction, Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

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
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Bounded label values: a route group, never the raw path with its ids. */
function routeGroup(path: string): string {
  const match = /^\/(graphql|v1\/orders|v1|idp|auth|healthz|readyz|metrics)(?=\/|$)/.exec(path);
  return match ? `/${match[1]}` : 'other';
}

export function recordRequests(metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction) => {
    // originalUrl, because routers rewrite req.path to be relative to where they are mounted.
    const route = routeGroup(req.originalUrl.split('?')[0]!);
    const end = metrics.httpDuration.startTimer({ route });
    res.on('finish', () => {
      end();
      metrics.httpRequests.inc({ route, method: req.method, status: String(res.statusCode) });
    });
    next();
  };
}
