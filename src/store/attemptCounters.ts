import type { Redis } from 'ioredis';

export interface CounterKey {
  readonly key: string;
  /** At this count the key is locked: further hits are refused and count nothing. */
  readonly limit: number;
}

export type HitResult =
  { readonly locked: true; readonly retryMs: number } | { readonly locked: false; readonly counts: number[] };

/** Failure counters with a lock, used to throttle sign-in. Both stores behave the same. */
export interface AttemptCounters {
  /**
   * Atomically: when any key has reached its limit, refuses with the time until the last lock ends and counts
   * nothing; otherwise counts one on every key. A count lives `windowMs` after its latest hit, a lock `lockMs`.
   */
  hit(keys: readonly CounterKey[], windowMs: number, lockMs: number): Promise<HitResult>;
  /** A success: forget `reset`, and take back the hit counted on each of `undo`. */
  settle(reset: string, undo: readonly string[]): Promise<void>;
}

const HIT = `
local window = tonumber(ARGV[1])
local lock = tonumber(ARGV[2])
local retry = -1
for i, key in ipairs(KEYS) do
  if tonumber(redis.call('GET', key) or '0') >= tonumber(ARGV[i + 2]) then
    local ttl = redis.call('PTTL', key)
    if ttl < 0 then
      ttl = lock
      redis.call('PEXPIRE', key, lock)
    end
    if ttl > retry then retry = ttl end
  end
end
if retry >= 0 then return {1, retry} end
local out = {0}
for i, key in ipairs(KEYS) do
  local n = redis.call('INCR', key)
  if n >= tonumber(ARGV[i + 2]) then redis.call('PEXPIRE', key, lock) else redis.call('PEXPIRE', key, window) end
  out[i + 1] = n
end
return out
`;

const SETTLE = `
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do
  local n = tonumber(redis.call('GET', KEYS[i]) or '0')
  if n > 1 then redis.call('DECR', KEYS[i]) elseif n == 1 then redis.call('DEL', KEYS[i]) end
end
return 1
`;

interface Scripts {
  ordersAttemptHit?: (...args: (string | number)[]) => Promise<number[]>;
  ordersAttemptSettle?: (...args: (string | number)[]) => Promise<number>;
}

/** Counters every replica shares; each key expires on its own, so Redis holds only recent failures. */
export function redisAttemptCounters(redis: Redis, prefix: string): AttemptCounters {
  const scripts = redis as unknown as Scripts;
  if (!scripts.ordersAttemptHit) redis.defineCommand('ordersAttemptHit', { lua: HIT });
  if (!scripts.ordersAttemptSettle) redis.defineCommand('ordersAttemptSettle', { lua: SETTLE });
  return {
    async hit(keys, windowMs, lockMs) {
      const reply = await scripts.ordersAttemptHit!(
        keys.length,
        ...keys.map((k) => prefix + k.key),
        windowMs,
        lockMs,
        ...keys.map((k) => k.limit),
      );
      return reply[0] === 1 ? { locked: true, retryMs: reply[1]! } : { locked: false, counts: reply.slice(1) };
    },
    async settle(reset, undo) {
      await scripts.ordersAttemptSettle!(1 + undo.length, prefix + reset, ...undo.map((k) => prefix + k));
    },
  };
}

/** The same counters in process, for a single instance; at most maxKeys are remembered, the oldest go first. */
export function memoryAttemptCounters(opts: { maxKeys?: number; now?: () => number } = {}): AttemptCounters {
  const now = opts.now ?? Date.now;
  const maxKeys = opts.maxKeys ?? 100_000;
  // Re-inserted on every change, so iteration order is oldest change first.
  const counts = new Map<string, { n: number; expiresAt: number }>();
  const live = (key: string) => {
    const c = counts.get(key);
    if (c && c.expiresAt <= now()) counts.delete(key);
    return c && c.expiresAt > now() ? c : undefined;
  };
  const put = (key: string, n: number, ttlMs: number) => {
    counts.delete(key);
    if (counts.size >= maxKeys) counts.delete(counts.keys().next().value!);
    counts.set(key, { n, expiresAt: now() + ttlMs });
  };
  return {
    async hit(keys, windowMs, lockMs) {
      let retry = -1;
      for (const { key, limit } of keys) {
        const c = live(key);
        if (c && c.n >= limit) retry = Math.max(retry, c.expiresAt - now());
      }
      if (retry >= 0) return { locked: true, retryMs: retry };
      return {
        locked: false,
        counts: keys.map(({ key, limit }) => {
          const n = (live(key)?.n ?? 0) + 1;
          put(key, n, n >= limit ? lockMs : windowMs);
          return n;
        }),
      };
    },
    async settle(reset, undo) {
      counts.delete(reset);
      for (const key of undo) {
        const c = live(key);
        if (c && c.n > 1) c.n -= 1;
        else counts.delete(key);
      }
    },
  };
}
