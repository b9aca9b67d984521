import type { Redis } from 'ioredis';

/** One client's fixed window after a charge, as Redis holds it. */
export interface WindowState {
  readonly allowed: boolean;
  /** Points spent in the window, the charge included when allowed. */
  readonly used: number;
  /** Milliseconds until the window ends. */
  readonly resetMs: number;
}

// All or nothing in one round trip: a refused charge neither spends nor opens a window, and every key that
// exists has an expiry of at most one window, so Redis forgets idle clients by itself.
const CHARGE = `
local cost = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local ttl = redis.call('PTTL', KEYS[1])
local used = 0
if ttl > 0 then used = tonumber(redis.call('GET', KEYS[1]) or '0') else ttl = window end
if used + cost > limit then return {0, used, ttl} end
if cost == 0 then return {1, used, ttl} end
if used == 0 then
  redis.call('SET', KEYS[1], cost, 'PX', window)
  return {1, cost, window}
end
return {1, redis.call('INCRBY', KEYS[1], cost), ttl}
`;

type ChargeCommand = (key: string, cost: number, limit: number, windowMs: number) => Promise<[number, number, number]>;

/** Fixed-window point counters in Redis, shared by every replica that uses the same prefix. */
export function redisRateWindows(redis: Redis, prefix: string) {
  const commands = redis as unknown as { ordersRateCharge?: ChargeCommand };
  // ioredis sends the script by its SHA and loads it once on NOSCRIPT.
  if (!commands.ordersRateCharge) redis.defineCommand('ordersRateCharge', { numberOfKeys: 1, lua: CHARGE });
  return {
    async charge(key: string, points: number, limit: number, windowMs: number): Promise<WindowState> {
      const [allowed, used, resetMs] = await commands.ordersRateCharge!(prefix + key, points, limit, windowMs);
      return { allowed: allowed === 1, used, resetMs };
    },
  };
}
