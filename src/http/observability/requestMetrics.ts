import type { Request, Response } from 'express';
import type { Metrics, Tally } from './metrics.js';

/** Bounded label values: a route group, never the raw path with its ids. */
function routeGroup(path: string): string {
  const match = /^\/(graphql|v1\/orders|v1|idp|auth|scim|healthz|readyz)(?=[/?]|$)/.exec(path);
  return match ? `/${match[1]}` : 'other';
}

/**
 * Counts a finished response and observes its duration: `http_requests_total` by route group, method and status, and
 * `http_request_duration_seconds`. Called by the request log's one listener (requestLog.ts), not a listener of its own.
 */
export function requestRecorder(metrics: Metrics) {
  // Label children are bound once per label value and kept, so a request costs counter increments only,
  // not label objects and their lookups (the label values are bounded: route groups, methods, statuses).
  const durations = new Map<string, { observe(value: number): void }>();
  const durationOf = (route: string) => {
    let child = durations.get(route);
    if (!child) durations.set(route, (child = metrics.httpDuration.child(route)));
    return child;
  };
  // Per route group, method and status: nested maps, so that finding the tally builds no key string.
  const counts = new Map<string, Map<string, Map<number, Tally>>>();
  const countOf = (route: string, method: string, status: number) => {
    let byMethod = counts.get(route);
    if (!byMethod) counts.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let tally = byStatus.get(status);
    if (!tally) byStatus.set(status, (tally = metrics.httpRequests.tally(route, method, String(status))));
    return tally;
  };
  return (req: Request, res: Response, seconds: number) => {
    // originalUrl, because routers rewrite req.path to be relative to where they are mounted.
    const route = routeGroup(req.originalUrl);
    durationOf(route).observe(seconds);
    countOf(route, req.method, res.statusCode).inc();
  };
}
