import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { tracing, type Attributes, type Span } from '../../tracing.js';

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE']);

/** Probes are polled every few seconds by every balancer: a trace each would bury the ones that matter. */
const UNTRACED = new Set(['/healthz', '/readyz']);

/**
 * The request's attributes by OpenTelemetry's HTTP server conventions. Never the query string: GraphQL's GET carries
 * its variables there, and sign-in redirects a code and state.
 */
export function requestAttributes(
  req: IncomingMessage,
  path: string,
  scheme: string,
  clientAddress?: string,
): Attributes {
  const method = req.method ?? 'GET';
  const [host, port] = (req.headers.host ?? '').split(':');
  return {
    'http.request.method': KNOWN_METHODS.has(method) ? method : '_OTHER',
    'url.path': path,
    'url.scheme': scheme,
    'server.address': host || undefined,
    'server.port': port ? Number(port) : scheme === 'https' ? 443 : 80,
    'client.address': clientAddress,
    'network.protocol.version': req.httpVersion,
    'user_agent.original': req.headers['user-agent'],
  };
}

/** The matched route's template (`/v1/orders/:id`), from Express's own match; none for an unrouted request. */
function routeOf(req: Request): string | undefined {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  const template = typeof path === 'string' ? `${req.baseUrl}${path}` : req.baseUrl;
  if (!template) return undefined;
  return template.length > 1 && template.endsWith('/') ? template.slice(0, -1) : template;
}

/** Ends an HTTP server span with its outcome: the status, the route it matched, and ERROR for a 5xx. */
function endServerSpan(span: Span, req: Request, res: Response, method: string) {
  const route = routeOf(req);
  span.setAttribute('http.response.status_code', res.statusCode);
  if (route) {
    span.setAttribute('http.route', route);
    span.updateName(`${method} ${route}`);
  }
  if (res.statusCode >= 500) tracing.fail(span, String(res.statusCode));
  else if (!res.writableFinished) tracing.fail(span, 'aborted');
  span.end();
}

/**
 * The HTTP server span of every request but the probes, first in the chain so that everything after it (the request
 * log, authentication, GraphQL, SQL) runs inside it: `traceparent`/`tracestate` continue the caller's trace. It is
 * named by the route template once the response is done (`GET /v1/orders/:id`), never by the raw URL. Mounted only
 * when tracing is on.
 */
export function traceRequests() {
  return (req: Request, res: Response, next: NextFunction) => {
    if (UNTRACED.has(req.url)) return next();
    const method = KNOWN_METHODS.has(req.method) ? req.method : 'HTTP';
    const span = tracing.start(method, { kind: 'server', parent: tracing.extract(req.headers), root: true });
    if (!span) return next();
    // A request the sampler left out still carries its trace (the span's ids, unsampled) to what it calls and logs,
    // but nothing is recorded of it: no attributes to build, no outcome to wait for.
    if (span.isRecording()) {
      const query = req.originalUrl.indexOf('?');
      const path = query < 0 ? req.originalUrl : req.originalUrl.slice(0, query);
      span.setAttributes(requestAttributes(req, path, req.protocol, req.ip));
      res.once('close', () => endServerSpan(span, req, res, method));
    }
    tracing.with(span, next);
  };
}
