import { pino } from 'pino';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { createSigninThrottle, SIGNIN_LIMITS } from '../../src/auth/idp/signinThrottle.js';
import { createRateBudget } from '../../src/http/middleware/rateBudget.js';
import { openRedis } from '../../src/store/redis.js';
import { startRedis, type RedisServer } from '../helpers/infra.js';

function recordingLogger() {
  const lines: { level: string; event: unknown }[] = [];
  const log = (level: string) => (obj: { event?: unknown }) => lines.push({ level, event: obj.event });
  return { lines, warn: log('warn'), info: log('info') };
}

describe('rate budget and sign-in counters in Redis', () => {
  let server: RedisServer;
  let redis: Redis;

  beforeAll(async () => {
    server = await startRedis();
    redis = await openRedis(server.url, pino({ level: 'silent' }));
  });

  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  test('two budgets over one Redis spend from one pool per client', async () => {
    const a = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'shared' });
    const b = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'shared' });
    assert.equal((await a.charge('sub:alice', 7)).remaining, 3);
    const fromB = await b.charge('sub:alice', 3);
    assert.equal(fromB.allowed, true);
    assert.equal(fromB.remaining, 0);
    assert.equal((await a.charge('sub:alice', 1)).allowed, false);
    assert.equal((await b.charge('sub:bob', 1)).remaining, 9);
    const other = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'other-database' });
    assert.equal((await other.charge('sub:alice', 1)).remaining, 9, 'another deployment has budgets of its own');
  });

  test('a refused charge spends nothing and opens no window', async () => {
    const budget = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'refusals' });
    const tooBig = await budget.charge('ip:10.0.0.1', 11);
    assert.equal(tooBig.allowed, false);
    assert.equal(tooBig.remaining, 10);
    assert.equal(await redis.exists('orders-api:refusals:rate:ip:10.0.0.1'), 0);
    await budget.charge('ip:10.0.0.1', 8);
    assert.equal((await budget.charge('ip:10.0.0.1', 3)).allowed, false);
    assert.equal(await redis.get('orders-api:refusals:rate:ip:10.0.0.1'), '8');
    assert.equal((await budget.charge('ip:10.0.0.1', 2)).allowed, true);
  });

  test('every key expires with its window, so idle clients cost Redis nothing', async () => {
    const budget = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'expiry' });
    const charge = await budget.charge('sub:carol', 1);
    const ttl = await redis.pttl('orders-api:expiry:rate:sub:carol');
    assert.ok(ttl > 0 && ttl <= 60_000, `ttl ${ttl}`);
    assert.ok(charge.resetSeconds > 0 && charge.resetSeconds <= 60);
    const long = `sub:${'x'.repeat(500)}`;
    await budget.charge(long, 1);
    const keys = await redis.keys('orders-api:expiry:rate:*');
    assert.equal(keys.length, 2);
    assert.ok(
      keys.every((k) => k.length < 100),
      'long subjects are hashed into short keys',
    );
  });

  test('concurrent charges never overspend', async () => {
    const budget = createRateBudget({ points: 25, windowSeconds: 60, redis, namespace: 'race' });
    const results = await Promise.all(Array.from({ length: 40 }, () => budget.charge('sub:alice', 1)));
    assert.equal(results.filter((r) => r.allowed).length, 25);
  });

  test('sign-in failures are counted in Redis and lock across replicas', async () => {
    const one = createSigninThrottle({ redis, namespace: 'signin', logger: recordingLogger() });
    const two = createSigninThrottle({ redis, namespace: 'signin', logger: recordingLogger() });
    for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter; i++) await (i % 2 ? one : two).begin('alice', '10.0.0.1');
    const locked = await one.begin('alice', '10.0.0.2');
    assert.equal(locked.locked, true);
    assert.equal(locked.locked && locked.retryAfterSeconds, SIGNIN_LIMITS.lockSeconds);
    const keys = await redis.keys('orders-api:signin:signin:*');
    assert.ok(keys.length >= 2);
    for (const key of keys) {
      assert.doesNotMatch(key, /alice/, 'user names do not reach Redis in clear');
      assert.ok((await redis.pttl(key)) > 0, 'every counter expires');
    }
  });

  test('when Redis goes away, requests are still answered from memory and the outage is logged once', async () => {
    const own = await startRedis();
    const client = await openRedis(own.url, pino({ level: 'silent' }));
    const logger = recordingLogger();
    const budget = createRateBudget({ points: 3, windowSeconds: 60, redis: client, namespace: 'outage', logger });
    const throttle = createSigninThrottle({ redis: client, namespace: 'outage', logger });
    assert.equal((await budget.charge('sub:alice', 1)).remaining, 2);
    const closed = once(client, 'close');
    await own.stop();
    await closed;
    const during = [await budget.charge('sub:alice', 1), await budget.charge('sub:alice', 1)];
    assert.ok(during.every((c) => c.allowed));
    assert.equal((await budget.charge('sub:alice', 5)).allowed, false, 'the in-process budget still limits');
    assert.deepEqual(await throttle.begin('bob', '10.0.0.1'), { locked: false, delayMs: 0 });
    assert.deepEqual(
      logger.lines.filter((l) => l.level === 'warn').map((l) => l.event),
      ['rate_limit.redis_unavailable', 'idp.throttle_redis_unavailable'],
    );
    client.disconnect();
  });
});
