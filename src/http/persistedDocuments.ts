import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { KeyValueCache, KeyValueCacheSetOptions } from '@apollo/utils.keyvaluecache';
import type { Redis } from 'ioredis';

const SHA256 = /^[0-9a-f]{64}$/;

export const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * A graphql-codegen client-preset manifest (`persisted-documents.json`): `{ "<sha256 hex>": "<document>" }`.
 * Every entry is checked against its hash, so a wrong manifest stops the start instead of running the wrong text.
 */
export function loadManifest(path: string): ReadonlyMap<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new Error(`PERSISTED_DOCUMENTS: ${path} is not readable JSON (${(error as Error).message})`, {
      cause: error,
    });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new Error(`PERSISTED_DOCUMENTS: ${path} must hold an object of "<sha256>": "<document>"`);
  const documents = new Map<string, string>();
  for (const [hash, text] of Object.entries(parsed)) {
    if (!SHA256.test(hash) || typeof text !== 'string' || sha256(text) !== hash)
      throw new Error(
        `PERSISTED_DOCUMENTS: the entry ${hash.slice(0, 80)} is not "<sha256 of the document>": "<document>"`,
      );
    documents.set(hash, text);
  }
  return documents;
}

export interface ApqBounds {
  readonly maxBytes: number;
  readonly maxEntries: number;
}

/**
 * Where automatic persisted queries live, with a bound on what anyone can make the server store:
 * documents larger than maxBytes are not registered (the client just keeps sending the full text),
 * and at most maxEntries are kept: least recently used first out in memory, oldest registered first
 * out in Redis. Entries also expire after Apollo's TTL.
 */
export function boundedApqStore(bounds: ApqBounds, redis?: Redis, prefix = 'orders-api:apq:'): KeyValueCache<string> {
  return redis ? new RedisApqStore(redis, prefix, bounds) : new MemoryApqStore(bounds);
}

class MemoryApqStore implements KeyValueCache<string> {
  // A Map keeps insertion order: re-inserting on read makes the first key the least recently used.
  private readonly entries = new Map<string, string>();
  constructor(private readonly bounds: ApqBounds) {}

  async get(key: string) {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  async set(key: string, value: string) {
    if (Buffer.byteLength(value) > this.bounds.maxBytes || this.bounds.maxEntries === 0) return;
    this.entries.delete(key);
    if (this.entries.size >= this.bounds.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, value);
  }

  async delete(key: string) {
    return this.entries.delete(key);
  }
}

class RedisApqStore implements KeyValueCache<string> {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly bounds: ApqBounds,
  ) {}

  async get(key: string) {
    return (await this.redis.get(this.prefix + key)) ?? undefined;
  }

  /**
   * Every replica registers into one index ordered by registration time; past maxEntries the oldest
   * are dropped, so the count is bounded across the fleet and not just per process.
   */
  async set(key: string, value: string, options?: KeyValueCacheSetOptions) {
    if (Buffer.byteLength(value) > this.bounds.maxBytes || this.bounds.maxEntries === 0) return;
    const ttl = Math.ceil(options?.ttl ?? 86_400);
    const index = `${this.prefix}index`;
    const now = Date.now();
    const replies = await this.redis
      .multi()
      .set(this.prefix + key, value, 'EX', ttl)
      .zadd(index, now, key)
      .zremrangebyscore(index, '-inf', now - ttl * 1000)
      .zcard(index)
      .exec();
    const count = Number(replies?.[3]?.[1] ?? 0);
    if (count <= this.bounds.maxEntries) return;
    const oldest = await this.redis.zpopmin(index, count - this.bounds.maxEntries);
    const keys = oldest.filter((_, i) => i % 2 === 0).map((k) => this.prefix + k);
    if (keys.length) await this.redis.del(...keys);
  }

  async delete(key: string) {
    await this.redis.zrem(`${this.prefix}index`, key);
    return (await this.redis.del(this.prefix + key)) > 0;
  }
}
