import type { Request as ExpressRequest } from 'express';
import { TOKEN_HEADER_KEY, TOKEN_QUERY_KEY, type Handler } from 'graphql-sse';
import { clientError } from '../problems/index.js';
import type { Release, StreamRegistry } from './streamRegistry.js';

const TOO_MANY = JSON.stringify({
  errors: [
    clientError('Too many open or reserved SSE streams for this user or client address.', 'TOO_MANY_SUBSCRIPTIONS'),
  ],
});

/**
 * graphql-sse keeps a single-connection reservation in memory until its stream has been opened and closed, so a PUT
 * that is never followed by a GET would stay forever. Each reservation holds one of its owner's stream places (user,
 * or address when anonymous) until it is connected, and is dropped when not connected in time.
 */
export function boundReservations<C>(
  handler: Handler<ExpressRequest, C>,
  streams: StreamRegistry,
  /** A reservation (PUT) must be connected (GET) within this time, or it is dropped. */
  ttlMs = streams.limits.sseReservationTtlSeconds * 1000,
): Handler<ExpressRequest, C> {
  const pending = new Map<string, { release: Release; timer: NodeJS.Timeout }>();

  const settle = (token: string): boolean => {
    const reservation = pending.get(token);
    if (!reservation) return false;
    pending.delete(token);
    clearTimeout(reservation.timer);
    reservation.release();
    return true;
  };

  /** graphql-sse forgets a reservation once its stream is opened and then closed: both, here. */
  const drop = async (token: string, raw: ExpressRequest, context: C) => {
    const [body] = await handler({
      method: 'GET',
      url: '/',
      headers: {
        get: (key) => (key === 'accept' ? 'text/event-stream' : key === TOKEN_HEADER_KEY ? token : null),
      },
      body: null,
      raw,
      context,
    });
    if (body && typeof body !== 'string') await body.return();
  };

  return async (req) => {
    const raw = req.raw;
    if (req.method === 'PUT') {
      const principal = raw.res!.locals.principal;
      const place =
        principal.kind === 'user'
          ? streams.takeUserSlot(principal.subject)
          : streams.admitAnonymousSse(raw.ip ?? raw.socket.remoteAddress ?? 'unknown');
      if (!place) {
        return [
          TOO_MANY,
          {
            status: 429,
            statusText: 'Too Many Requests',
            headers: { 'content-type': 'application/json; charset=utf-8' },
          },
        ];
      }
      let response;
      try {
        response = await handler(req);
      } catch (error) {
        place();
        throw error;
      }
      const [token, init] = response;
      if (init.status === 201 && typeof token === 'string') {
        const timer = setTimeout(() => {
          if (settle(token)) void drop(token, raw, req.context).catch(() => undefined);
        }, ttlMs);
        timer.unref();
        pending.set(token, { release: place, timer });
      } else {
        place();
      }
      return response;
    }
    if (req.method === 'GET') {
      // The reservation becomes a stream, which takes a place of its own (holdSseStream).
      const token = req.headers.get(TOKEN_HEADER_KEY) ?? new URL(req.url, 'http://x').searchParams.get(TOKEN_QUERY_KEY);
      if (token) settle(token);
    }
    return handler(req);
  };
}
