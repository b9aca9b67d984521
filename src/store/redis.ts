import type { KeyValueCache, KeyValueCacheSetOptions } from '@apollo/utils.keyvaluecache';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/** How long a closing connection may take to end before it is destroyed. */
const DISCONNECT_TIMEOUT_MS = 200;

/**
 * Connects to Redis, or starts degraded when it is down: ioredis keeps reconnecting, and until it
 * succeeds each replica keeps its state in process and reads other replicas' events from the outbox.
 */
export async function openRedis(url: string, logger: Logger): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
    // disconnect() ends the socket and arms a timer to destroy it if it has not closed by then; a connection that is
    // already gone (Redis down, reconnecting) never closes again, so ioredis's default 2 s kept that timer, and with
    // it the process that was shutting down, alive for 2 s.
    disconnectTimeout: DISCONNECT_TIMEOUT_MS,
  });
  watchConnection(redis, logger);
  try {
    await redis.connect();
  } catch (err) {
    logger.warn(
      { err, redis: 'unavailable' },
      'Redis is unavailable: starting degraded (events between replicas by PostgreSQL polling) until it returns',
    );
  }
  return redis;
}

/** Logs each change between connected and not, once, instead of every reconnection attempt. */
export function watchConnection(redis: Redis, logger: Logger, role = 'client'): void {
  let up = false;
  // ioredis reports every failed attempt as an 'error' event; the transitions below say what matters.
  redis.on('error', () => undefined);
  redis.on('ready', () => {
    if (!up) logger.info({ redis: 'ready', role }, 'Redis connected');
    up = true;
  });
  redis.on('close', () => {
    if (up) logger.warn({ redis: 'unavailable', role }, 'Redis connection lost; reconnecting');
    up = false;
  });
}

export const redisReady = (redis: Redis) => redis.status === 'ready';

/** QUIT waits for a reply that a disconnected client never gets. */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redisReady(redis)) await redis.quit().catch(() => redis.disconnect());
  else redis.disconnect();
}

/** Apollo's cache interface (persisted queries) over Redis, so every replica knows every hash. */
export class RedisKeyValueCache implements KeyValueCache<string> {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  // While Redis is down the cache is empty rather than an error: clients resend the full query.
  async get(key: string): Promise<string | undefined> {
    if (!redisReady(this.redis)) return undefined;
    return (await this.redis.get(this.prefix + key).catch(() => null)) ?? undefined;
  }

  async set(key: string, value: string, options?: KeyValueCacheSetOptions): Promise<void> {
    if (!redisReady(this.redis)) return;
    const write = options?.ttl
      ? this.redis.set(this.prefix + key, value, 'EX', Math.ceil(options.ttl))
      : this.redis.set(this.prefix + key, value);
    await write.catch(() => undefined);
  }

  async delete(key: string): Promise<boolean> {
    return (await this.redis.del(this.prefix + key)) > 0;
  }
}

/** Rejects when Redis is slower than `ms`, so a hung connection costs a request at most that long. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
