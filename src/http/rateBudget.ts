import type { Principal } from '../domain/policy.js';

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
