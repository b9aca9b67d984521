import type { Request } from 'express';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { sessionKey } from '../../auth/sessions.js';
import type { StreamLimits } from '../../config/index.js';
import type { Principal, User } from '../../domain/policy.js';
import { readCookie } from '../middleware/index.js';

/** Revocations reach other replicas over Redis at once; this poll is the truth, with or without Redis. */
const SESSION_CHECK_MS = 2_000;
const SESSION_KEY = /^[A-Za-z0-9_-]{43}$/;
export const SESSION_ENDED = 'The session has ended (signed out, expired or revoked); sign in again.';

/** Ends one stream, saying why. */
export type Ender = (reason: string) => void;
/** Gives a slot back; safe to call more than once. */
export type Release = () => void;

function once(fn: () => void): Release {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

function counter() {
  const counts = new Map<string, number>();
  return {
    take(key: string, max: number): Release | null {
      const n = counts.get(key) ?? 0;
      if (n >= max) return null;
      counts.set(key, n + 1);
      return once(() => {
        const left = (counts.get(key) ?? 1) - 1;
        if (left > 0) counts.set(key, left);
        else counts.delete(key);
      });
    },
  };
}

/** Restarts on every `idle()`, stops on `busy()`: fires once a socket has held nothing for `ms`. */
export function idleTimer(ms: number, onIdle: () => void) {
  let timer: NodeJS.Timeout | undefined;
  return {
    idle() {
      clearTimeout(timer);
      timer = setTimeout(onIdle, ms);
      timer.unref();
    },
    busy() {
      // Let go of the cleared timer too: a busy connection holds none.
      clearTimeout(timer);
      timer = undefined;
    },
  };
}

/**
 * Every open stream of this replica, WebSocket and SSE alike: the per-IP and per-user bounds they share, and the
 * browser session behind each, so that a session that ends (signed out on any replica, expired, revoked) takes its
 * streams with it within SESSION_CHECK_MS.
 */
export function createStreamRegistry(deps: {
  limits: StreamLimits;
  sessions: { liveAmong(keys: readonly string[]): Promise<Set<string>> };
  /** Names the shared database, so replicas of different deployments never hear each other. */
  channelPrefix: string;
  redis?: Redis;
  logger: Logger;
  /** Called whenever a bound turns a stream away (per IP, per user, anonymous SSE). */
  onRefused?: () => void;
  /**
   * Whether a stream's caller may go on (the directory's verdict: deactivated, or other roles now), or why not;
   * asked when a stream opens and at every `recheckCallers`.
   */
  verdict?: (caller: User) => string | null;
}) {
  const { limits, logger } = deps;
  const refused = <T>(slot: T | null): T | null => {
    if (slot === null) deps.onRefused?.();
    return slot;
  };
  const sockets = counter();
  const anonymousSse = counter();
  const users = counter();
  const replica = counter();
  const bySession = new Map<string, Set<Ender>>();
  /** The caller each open stream was admitted as, by the stream's ender. */
  const callers = new Map<Ender, User>();
  const channel = `${deps.channelPrefix}:session-ended`;

  const endLocal = (key: string) => {
    const enders = bySession.get(key);
    if (!enders) return;
    bySession.delete(key);
    for (const end of enders) {
      try {
        end(SESSION_ENDED);
      } catch (err) {
        logger.warn({ err }, 'ending a stream failed');
      }
    }
  };

  let checking = false;
  const check = async () => {
    if (checking || !bySession.size) return;
    checking = true;
    try {
      const keys = [...bySession.keys()];
      const live = await deps.sessions.liveAmong(keys);
      for (const key of keys) if (!live.has(key)) endLocal(key);
    } catch (err) {
      logger.warn({ err }, 'checking the sessions of open streams failed; retrying');
    } finally {
      checking = false;
    }
  };
  const poll = setInterval(() => void check(), SESSION_CHECK_MS);
  poll.unref();

  const subscriber = deps.redis?.duplicate();
  if (subscriber) {
    subscriber.on('message', (_channel: string, message: string) => {
      if (SESSION_KEY.test(message)) endLocal(message);
    });
    subscriber.on('error', (err: unknown) => logger.warn({ err }, 'session revocation channel error'));
    void subscriber.subscribe(channel).catch((err: unknown) => {
      logger.warn({ err }, 'cannot listen for session revocations; relying on the poll');
    });
  }

  return {
    limits,
    /** A WebSocket from this address, or null when it already holds WS_MAX_PER_IP. */
    admitSocket: (ip: string) => refused(sockets.take(ip, limits.wsMaxPerIp)),
    /**
     * One of this replica's STREAMS_MAX_PER_REPLICA places (a WebSocket, or an SSE stream), or null when all are
     * held: the client is told to come back later, and a balancer may send it to another replica.
     */
    takeReplicaSlot: () => refused(replica.take('replica', limits.maxPerReplica)),
    /** An anonymous SSE stream from this address, or null when it already holds SSE_ANONYMOUS_MAX_PER_IP. */
    admitAnonymousSse: (ip: string) => refused(anonymousSse.take(ip, limits.sseAnonymousMaxPerIp)),
    /** One of a user's STREAMS_MAX_PER_USER: a WebSocket subscription or an SSE stream. */
    takeUserSlot: (subject: string) => refused(users.take(subject, limits.maxPerUser)),

    /** Ties a stream to the session (cookie value) that authenticated it; returns the way to untie it. */
    bindSession(sessionId: string, end: Ender): Release {
      const key = sessionKey(sessionId);
      if (!key) return () => undefined;
      let enders = bySession.get(key);
      if (!enders) bySession.set(key, (enders = new Set()));
      enders.add(end);
      return once(() => {
        enders.delete(end);
        if (!enders.size && bySession.get(key) === enders) bySession.delete(key);
      });
    },

    /**
     * Ties a stream to the caller it was admitted as, so that it ends when the directory deactivates that person or
     * changes their roles (`recheckCallers`); ends it at once if that has already happened.
     */
    bindCaller(principal: Principal, end: Ender): Release {
      if (principal.kind !== 'user' || !deps.verdict) return () => undefined;
      const why = deps.verdict(principal);
      // Not from inside the caller's own setup: the stream ends on the next tick.
      if (why) queueMicrotask(() => end(why));
      else callers.set(end, principal);
      return once(() => callers.delete(end));
    },

    /** The directory changed: every open stream whose caller may no longer go on ends, saying why. */
    recheckCallers() {
      if (!deps.verdict) return;
      for (const [end, caller] of callers) {
        const why = deps.verdict(caller);
        if (!why) continue;
        callers.delete(end);
        try {
          end(why);
        } catch (err) {
          logger.warn({ err }, 'ending a stream failed');
        }
      }
    },

    /** This replica revoked the session: its streams here end now, the other replicas' on the message or poll. */
    sessionRevoked(sessionId: string) {
      const key = sessionKey(sessionId);
      if (!key) return;
      endLocal(key);
      deps.redis?.publish(channel, key).catch((err: unknown) => {
        logger.warn({ err }, 'publishing a session revocation failed; replicas notice it by polling');
      });
    },

    async close() {
      clearInterval(poll);
      await subscriber?.quit().catch(() => undefined);
    },
  };
}

export type StreamRegistry = ReturnType<typeof createStreamRegistry>;

/**
 * An SSE stream's place: one of its user's slots (or, anonymous, one of its IP's) and one of the replica's, tied to
 * the session cookie that authenticated it. Or which bound is reached: the client's own, or the replica's.
 */
export function holdSseStream(
  streams: StreamRegistry,
  req: Request,
  principal: Principal,
  cookieName: string,
  end: Ender,
): Release | 'client' | 'replica' {
  const own =
    principal.kind === 'user'
      ? streams.takeUserSlot(principal.subject)
      : streams.admitAnonymousSse(req.ip ?? req.socket.remoteAddress ?? 'unknown');
  if (!own) return 'client';
  const place = streams.takeReplicaSlot();
  if (!place) {
    own();
    return 'replica';
  }
  const slot = once(() => {
    own();
    place();
  });
  // A Bearer header wins over the cookie (authenticate.ts), so only a cookie-only request rides on a session.
  const sessionId =
    principal.kind === 'user' && req.headers.authorization === undefined
      ? readCookie(req.headers.cookie, cookieName)
      : undefined;
  const unbind = sessionId ? streams.bindSession(sessionId, end) : () => undefined;
  const unbindCaller = streams.bindCaller(principal, end);
  return once(() => {
    slot();
    unbind();
    unbindCaller();
  });
}

/** The session store, whose revocations also end the session's streams (here at once, elsewhere soon). */
export function endingStreamsOnRevoke<S extends { revoke(id: string): Promise<unknown> }>(
  store: S,
  streams: StreamRegistry,
): S {
  return {
    ...store,
    async revoke(id: string) {
      const revoked = await store.revoke(id);
      if (revoked) streams.sessionRevoked(id);
      return revoked;
    },
  };
}
