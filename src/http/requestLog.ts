import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';

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
 * What a request log line says about the request: short, and no headers at all, so none can carry a credential or
 * a cookie into the log (the logger's redaction still covers the url's query and credentials).
 */
const describe = (req: IncomingMessage) => ({
  id: req.id,
  method: req.method,
  url: req.url,
  remoteAddress: req.socket?.remoteAddress,
});

/**
 * The request id, `X-Request-Id`, a per-request logger and one log line when the response is finished — what
 * pino-http did, for less: the request's logger is made only when something logs through it, and the finishing
 * line is built only when its level is on. Server errors (5xx) and aborted responses log at error, the rest at
 * info; health checks are not logged.
 */
export function requestLog(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    let log: Logger | undefined;
    Object.defineProperty(req, 'log', {
      configurable: true,
      enumerable: false,
      get: () => (log ??= logger.child({ req: { id, method: req.method, url: req.originalUrl } })),
      set: (value: Logger) => void (log = value),
    });
    if (req.url === '/healthz' || req.url === '/readyz') return next();
    const started = performance.now();
    const done = (aborted: boolean) => {
      const error = aborted || res.statusCode >= 500;
      const level = error ? 'error' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      logger[level](
        {
          req: { ...describe(req), url: req.originalUrl },
          res: { statusCode: res.statusCode },
          responseTime: Math.round(performance.now() - started),
        },
        aborted ? 'request aborted' : error ? 'request errored' : 'request completed',
      );
    };
    res.once('finish', () => done(false));
    res.once('close', () => {
      if (!res.writableFinished) done(true);
    });
    next();
  };
}
