import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { KeyValueCache, KeyValueCacheSetOptions } from '@apollo/utils.keyvaluecache';
import type { Redis } from 'ioredis';

const SHA256 = /^[0-9a-f]{64}$/;

const hashes = new Map<string, string>();
/** Documents this long or shorter have their hash remembered: clients send the same few texts again and again. */
const REMEMBERED_LENGTH = 4096;

/**
 * The sha256 (hex) of a document's text. The hashes of the last 1,000 short texts are remembered, since every request
 * with a text needs its hash (the persisted-query check, the screen's memory) and looking a string up costs far less
 * than hashing it.
 */
export function sha256(text: string): string {
  if (text.length > REMEMBERED_LENGTH) return createHash('sha256').update(text).digest('hex');
  let hash = hashes.get(text);
  if (hash === undefined) {
    hash = createHash('sha256').update(text).digest('hex');
    if (hashes.size >= 1000) hashes.delete(hashes.keys().next().value!);
    hashes.set(text, hash);
  }
  return hash;
}

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

/** KEYS: the document's key, the index. ARGV: the document, its TTL (s), its hash, maxEntries, the key prefix. */
const REGISTER = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[1], ARGV[1], 'EX', ttl)
redis.call('ZADD', KEYS[2], now, ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl * 1000000)
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if excess > 0 then
  local oldest = redis.call('ZPOPMIN', KEYS[2], excess)
  for i = 1, #oldest, 2 do redis.call('DEL', ARGV[5] .. oldest[i]) end
end
return excess
`;

class RedisApqStore implements KeyValueCache<string> {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly bounds: ApqBounds,
  ) {
    // As the rate windows do: ioredis sends the script by its SHA and loads it once on NOSCRIPT.
    if (!(redis as unknown as { ordersApqRegister?: unknown }).ordersApqRegister)
      redis.defineCommand('ordersApqRegister', { numberOfKeys: 2, lua: REGISTER });
  }

  async get(key: string) {
    return (await this.redis.get(this.prefix + key)) ?? undefined;
  }

  /**
   * Every replica registers into one index ordered by registration time; past maxEntries the oldest
   * are dropped, so the count is bounded across the fleet and not just per process. One script, timed by
   * Redis's own clock in microseconds: two registrations in the same millisecond (or from replicas whose
   * clocks differ) still keep their order, and no other replica runs between the count and the eviction.
   */
  async set(key: string, value: string, options?: KeyValueCacheSetOptions) {
    if (Buffer.byteLength(value) > this.bounds.maxBytes || this.bounds.maxEntries === 0) return;
    const ttl = Math.ceil(options?.ttl ?? 86_400);
    const commands = this.redis as unknown as { ordersApqRegister: (...args: (string | number)[]) => Promise<number> };
    await commands.ordersApqRegister(
      this.prefix + key,
      `${this.prefix}index`,
      value,
      ttl,
      key,
      this.bounds.maxEntries,
      this.prefix,
    );
  }

  async delete(key: string) {
    await this.redis.zrem(`${this.prefix}index`, key);
    return (await this.redis.del(this.prefix + key)) > 0;
  }
}
