import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { memoryAttemptCounters, redisAttemptCounters, type AttemptCounters } from '../../store/attemptCounters.js';
import { withTimeout } from '../../store/redis.js';

/** docs/auth.md states these numbers. Per address they are higher: many people may share one (an office NAT). */
export const SIGNIN_LIMITS = {
  user: { delayAfter: 5, lockAfter: 10 },
  ip: { delayAfter: 20, lockAfter: 50 },
  /** Added before checking the password once an attempt is past a delayAfter (see signinDelayMs). */
  delayMs: 1000,
  /** Failures are forgotten this long after the latest one. */
  windowSeconds: 15 * 60,
  lockSeconds: 15 * 60,
} as const;

/**
 * The delay every environment uses, but NODE_ENV=test: there 50 ms, so that the tests of throttling do not sit out
 * seconds of it (as with argon2Params, it follows NODE_ENV and has no setting of its own). Still above zero: the
 * delay is also what tells the page to say that attempts are slowed.
 */
export function signinDelayMs(nodeEnv: 'development' | 'test' | 'production'): number {
  return nodeEnv === 'test' ? 50 : SIGNIN_LIMITS.delayMs;
}

export type SigninVerdict =
  { readonly locked: true; readonly retryAfterSeconds: number } | { readonly locked: false; readonly delayMs: number };

/**
 * What an attempt proves: a password (counted per username) or a second factor (per account subject). Each has
 * counters of its own, so no username typed into the sign-in form can spend an account's second-factor budget.
 */
export type AttemptKind = 'password' | 'second-factor';

export interface SigninThrottle {
  /**
   * Counts an attempt for this username (or subject) and address before the secret is checked, so parallel guesses
   * cannot slip past the lock. Whether the user exists plays no part.
   */
  begin(username: string, ip: string | undefined, kind?: AttemptKind): Promise<SigninVerdict>;
  /** The attempt signed in: the username starts afresh and the address gets its attempt back. */
  succeeded(username: string, ip: string | undefined, kind?: AttemptKind): Promise<void>;
}

export interface SigninThrottleOptions {
  readonly redis?: Redis;
  /** Keeps deployments (databases) that share one Redis apart. */
  readonly namespace: string;
  readonly lockSeconds?: number;
  /** SIGNIN_LIMITS.delayMs unless given (signinDelayMs). */
  readonly delayMs?: number;
  readonly logger: Pick<Logger, 'warn' | 'info'>;
  readonly now?: () => number;
}

const REDIS_TIMEOUT_MS = 500;

/**
 * Keys are hashes, so an anonymous caller stores a fixed few bytes per name it tries, and no user name
 * reaches Redis in clear. Names are compared as the user table does: trimmed and lower-cased.
 */
const digest = (kind: string, value: string) =>
  `${kind}:${createHash('sha256').update(value).digest('base64url').slice(0, 22)}`;
const userKey = (username: string, kind: AttemptKind = 'password') =>
  digest(kind === 'password' ? 'u' : 'f', username.trim().toLowerCase());
const ipKey = (ip: string | undefined) => digest('ip', ip ?? 'unknown');

export function createSigninThrottle(opts: SigninThrottleOptions): SigninThrottle {
  const local = memoryAttemptCounters(opts.now ? { now: opts.now } : {});
  const shared = opts.redis && redisAttemptCounters(opts.redis, `orders-api:${opts.namespace}:signin:`);
  const windowMs = SIGNIN_LIMITS.windowSeconds * 1000;
  const lockMs = (opts.lockSeconds ?? SIGNIN_LIMITS.lockSeconds) * 1000;
  const delayMs = opts.delayMs ?? SIGNIN_LIMITS.delayMs;
  let failing = false;

  /** Redis when it answers; otherwise this replica's memory, so sign-in keeps working (fail open). */
  async function counters<T>(use: (c: AttemptCounters) => Promise<T>): Promise<T> {
    if (!shared) return use(local);
    try {
      if (opts.redis!.status !== 'ready') throw new Error(`Redis connection is ${opts.redis!.status}`);
      const result = await withTimeout(use(shared), REDIS_TIMEOUT_MS);
      if (failing) opts.logger.info({ event: 'idp.throttle_redis_recovered' }, 'sign-in throttling uses Redis again');
      failing = false;
      return result;
    } catch (err) {
      if (!failing) {
        opts.logger.warn(
          { event: 'idp.throttle_redis_unavailable', err },
          'Redis cannot be reached; sign-in failures are counted per replica until it can',
        );
      }
      failing = true;
      return use(local);
    }
  }

  return {
    async begin(username, ip, kind) {
      const result = await counters((c) =>
        c.hit(
          [
            { key: userKey(username, kind), limit: SIGNIN_LIMITS.user.lockAfter },
            { key: ipKey(ip), limit: SIGNIN_LIMITS.ip.lockAfter },
          ],
          windowMs,
          lockMs,
        ),
      );
      if (result.locked) return { locked: true, retryAfterSeconds: Math.max(1, Math.ceil(result.retryMs / 1000)) };
      const [forUser = 0, forIp = 0] = result.counts;
      const slow = forUser > SIGNIN_LIMITS.user.delayAfter || forIp > SIGNIN_LIMITS.ip.delayAfter;
      return { locked: false, delayMs: slow ? delayMs : 0 };
    },
    async succeeded(username, ip, kind) {
      await counters((c) => c.settle(userKey(username, kind), [ipKey(ip)]));
    },
  };
}
