import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Principal } from '../../domain/policy.js';
import { redisRateWindows } from '../../store/rateWindows.js';
import { withTimeout } from '../../store/redis.js';

/** What a client has left in its current window, after a charge. */
export interface Charge {
  /** False when the charge did not fit: nothing was spent and the request must be refused with 429. */
  readonly allowed: boolean;
  /** Points per window. */
  readonly limit: number;
  /** Points left in the current window (never negative). */
  readonly remaining: number;
  /** Seconds until the window resets and the budget is whole again. */
  readonly resetSeconds: number;
  readonly windowSeconds: number;
}

/**
 * One budget of points per client per fixed window, shared by every transport: GraphQL spends its
 * computed cost, REST a fixed price per route. A charge is all or nothing.
 */
export interface RateBudget {
  charge(key: string, points: number): Promise<Charge>;
  close(): Promise<void>;
}

export interface RateBudgetOptions {
  readonly points: number;
  readonly windowSeconds: number;
  /** Clients remembered at once in process; the oldest window is forgotten past it. */
  readonly maxKeys?: number;
  readonly now?: () => number;
}

/** The in-process budget, for a single instance (no REDIS_URL). Memory is bounded by maxKeys. */
export function createMemoryRateBudget(opts: RateBudgetOptions): RateBudget {
  const now = opts.now ?? Date.now;
  const maxKeys = opts.maxKeys ?? 100_000;
  const windowMs = opts.windowSeconds * 1000;
  // Insertion order is window-start order for live keys, so the first entry is the oldest.
  const windows = new Map<string, { start: number; used: number }>();

  return {
    async charge(key, points) {
      const t = now();
      let w = windows.get(key);
      if (!w || t - w.start >= windowMs) {
        if (w) windows.delete(key);
        w = { start: t, used: 0 };
        if (windows.size >= maxKeys) windows.delete(windows.keys().next().value!);
        windows.set(key, w);
      }
      const allowed = w.used + points <= opts.points;
      if (allowed) w.used += points;
      return {
        allowed,
        limit: opts.points,
        remaining: Math.max(0, opts.points - w.used),
        resetSeconds: Math.max(1, Math.ceil((w.start + windowMs - t) / 1000)),
        windowSeconds: opts.windowSeconds,
      };
    },
    async close() {
      windows.clear();
    },
  };
}

export interface SharedRateBudgetOptions extends RateBudgetOptions {
  /** Every replica with the same Redis and namespace spends from one budget per client. */
  readonly redis?: Redis;
  /** Keeps deployments (databases) that share one Redis apart. */
  readonly namespace?: string;
  readonly logger?: Pick<Logger, 'warn' | 'info'>;
  /** A Redis answer slower than this is treated as Redis being down. */
  readonly timeoutMs?: number;
}

/**
 * The budget the app uses: in Redis when configured (one atomic script per charge), else in process. When Redis
 * cannot answer, requests are not refused for it: each replica counts in its own memory until Redis is back
 * (fail open), and the outage is logged once.
 */
export function createRateBudget(opts: SharedRateBudgetOptions): RateBudget {
  const { redis } = opts;
  if (!redis) return createMemoryRateBudget(opts);
  const windows = redisRateWindows(redis, `orders-api:${opts.namespace ?? 'default'}:rate:`);
  const fallback = createMemoryRateBudget(opts);
  const timeoutMs = opts.timeoutMs ?? 500;
  let failing = false;

  return {
    async charge(key, points) {
      try {
        // A disconnected client would queue the command; answering from memory at once keeps latency flat.
        if (redis.status !== 'ready') throw new Error(`Redis connection is ${redis.status}`);
        const w = await withTimeout(
          windows.charge(boundedKey(key), points, opts.points, opts.windowSeconds * 1000),
          timeoutMs,
        );
        if (failing) {
          failing = false;
          opts.logger?.info({ event: 'rate_limit.redis_recovered' }, 'rate budget is shared through Redis again');
        }
        return {
          allowed: w.allowed,
          limit: opts.points,
          remaining: Math.max(0, opts.points - w.used),
          resetSeconds: Math.max(1, Math.ceil(w.resetMs / 1000)),
          windowSeconds: opts.windowSeconds,
        };
      } catch (err) {
        if (!failing) {
          failing = true;
          opts.logger?.warn(
            { event: 'rate_limit.redis_unavailable', err },
            'Redis cannot be reached; each replica counts rate budgets in its own memory until it can',
          );
        }
        return fallback.charge(key, points);
      }
    },
    async close() {
      await fallback.close();
    },
  };
}

/** Subjects are chosen by the issuer and may be long; Redis keys stay short whatever they are. */
function boundedKey(key: string): string {
  return key.length <= 128 ? key : `h:${createHash('sha256').update(key).digest('base64url')}`;
}

/** Whose budget a request spends: the token's subject, else the OAuth client, else the address. */
export function clientKey(principal: Principal, ip: string | undefined, clientId?: string): string {
  if (principal.kind === 'user') return `sub:${principal.subject}`;
  if (clientId) return `client:${clientId}`;
  return `ip:${ip ?? 'unknown'}`;
}

/**
 * The IETF httpapi RateLimit fields (draft-ietf-httpapi-ratelimit-headers, structured-field form):
 * `RateLimit-Policy: "orders";q=5000;w=3600` and `RateLimit: "orders";r=4987;t=3120`, plus
 * `Retry-After` when the charge was refused.
 */
export function rateLimitHeaders(charge: Charge): Record<string, string> {
  const headers: Record<string, string> = {
    'RateLimit-Policy': `"orders";q=${charge.limit};w=${charge.windowSeconds}`,
    RateLimit: `"orders";r=${charge.remaining};t=${charge.resetSeconds}`,
  };
  if (!charge.allowed) headers['Retry-After'] = String(charge.resetSeconds);
  return headers;
}
