import { randomUUID } from 'node:crypto';
import { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { tracing } from '../../tracing.js';

declare module 'node:http' {
  interface IncomingMessage {
    /** The request id: the caller's sane `X-Request-Id`, or a fresh UUID; echoed as `X-Request-Id`. */
    id: string;
    /** A logger bound to this request (created on first use). */
    log: Logger;
  }
}

/** Request ids a caller may choose: short, and nothing a log line or header could be tricked by. */
const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Where requestLog keeps a request's logger, or the logger to make it from, until something logs. Registered
 * symbols: the accessor below is defined once per process, and must understand requests from any copy of this
 * module (Jest loads one per test file).
 */
const LOG = Symbol.for('orders-api.requestLog.logger');
const PARENT = Symbol.for('orders-api.requestLog.parent');
/** The logger a request's own is made from, on first use. */
interface Parent {
  readonly [PARENT]: Logger;
}
const isParent = (value: unknown): value is Parent => typeof value === 'object' && value !== null && PARENT in value;
type Logged = Request & { [LOG]?: Logger | Parent };

/**
 * `req.log`, defined once on the request prototype: the request's child logger is made the first time something
 * reads it, and a request that never logs pays nothing for it (an accessor defined on each request would change
 * every request object's shape).
 */
function defineRequestLogger() {
  if (Object.getOwnPropertyDescriptor(IncomingMessage.prototype, 'log')) return;
  Object.defineProperty(IncomingMessage.prototype, 'log', {
    configurable: true,
    enumerable: false,
    get(this: Logged): Logger {
      const log = this[LOG];
      if (!isParent(log)) return log as Logger;
      const child = log[PARENT].child({ req: { id: this.id, method: this.method, url: this.originalUrl } });
      this[LOG] = child;
      return child;
    },
    set(this: Logged, value: Logger) {
      this[LOG] = value;
    },
  });
}

const isEventStream = (res: Response) => String(res.getHeader('content-type') ?? '').startsWith('text/event-stream');

export interface RequestLogOptions {
  /**
   * Share (0–1) of successful requests (status below 400) logged at info; the others are logged at debug. 4xx
   * responses are logged at info, 5xx and aborted responses at error, always; an event stream the client closed at
   * info.
   */
  readonly sample?: number;
  /** Called for every finished response (health checks included) from the same listener: the request metrics. */
  readonly record?: (req: Request, res: Response, seconds: number) => void;
}

/**
 * The request id, `X-Request-Id`, a per-request logger and one log line when the response is finished — what
 * pino-http did, for less: the request's logger is made only when something logs through it, and the finishing
 * line is built only when its level is on. Server errors (5xx) and aborted responses log at error and refusals
 * (4xx) and event streams the client closed at info, always; successes at debug, or at info for the sampled share of them; health checks are not logged.
 */
export function requestLog(logger: Logger, options: RequestLogOptions = {}) {
  defineRequestLogger();
  const { sample = 0, record } = options;
  const parent: Parent = { [PARENT]: logger };
  const line = (req: Request, res: Response, level: 'error' | 'info' | 'debug', started: number, msg: string) =>
    logger[level](
      {
        req: { id: req.id, method: req.method, url: req.originalUrl, remoteAddress: req.socket?.remoteAddress },
        res: { statusCode: res.statusCode },
        responseTime: Math.round(performance.now() - started),
      },
      msg,
    );
  return (req: Request, res: Response, next: NextFunction) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    req.id = id;
    (req as Logged)[LOG] = parent;
    res.setHeader('X-Request-Id', id);
    const probe = req.url === '/healthz' || req.url === '/readyz';
    if (probe && !record) return next();
    const started = performance.now();
    // One listener for the log line and the metrics, bound to the request's context, so that the line carries its
    // trace (when tracing is on).
    res.on(
      'close',
      tracing.bind(() => {
        if (res.writableFinished) record?.(req, res, (performance.now() - started) / 1000);
        if (probe) return;
        if (!res.writableFinished) {
          // An event stream has no end of its own: the client closing it is how it ends, not a failure.
          if (res.headersSent && isEventStream(res)) {
            if (logger.isLevelEnabled('info')) line(req, res, 'info', started, 'stream closed by the client');
            return;
          }
          if (logger.isLevelEnabled('error')) line(req, res, 'error', started, 'request aborted');
          return;
        }
        const status = res.statusCode;
        if (status >= 500) {
          if (logger.isLevelEnabled('error')) line(req, res, 'error', started, 'request errored');
          return;
        }
        const level = status >= 400 || (sample > 0 && Math.random() < sample) ? 'info' : 'debug';
        if (logger.isLevelEnabled(level)) line(req, res, level, started, 'request completed');
      }),
    );
    next();
  };
}
