import { describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { ANONYMOUS } from '../../src/domain/policy.js';
import {
  clientKey,
  createMemoryRateBudget,
  createRateBudget,
  rateLimitHeaders,
} from '../../src/http/middleware/rateBudget.js';

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('in-process rate budget', () => {
  test('spends points and reports what is left and when the window resets', async () => {
    const c = clock();
    const budget = createMemoryRateBudget({ points: 10, windowSeconds: 60, now: c.now });
    const first = await budget.charge('sub:alice', 3);
    assert.deepEqual(first, { allowed: true, limit: 10, remaining: 7, resetSeconds: 60, windowSeconds: 60 });
    c.advance(20_500);
    const second = await budget.charge('sub:alice', 1);
    assert.equal(second.remaining, 6);
    assert.equal(second.resetSeconds, 40);
  });

  test('a charge that does not fit is refused and spends nothing', async () => {
    const c = clock();
    const budget = createMemoryRateBudget({ points: 10, windowSeconds: 60, now: c.now });
    await budget.charge('k', 8);
    const refused = await budget.charge('k', 3);
    assert.equal(refused.allowed, false);
    assert.equal(refused.remaining, 2);
    assert.equal((await budget.charge('k', 2)).allowed, true);
    assert.equal((await budget.charge('k', 1)).allowed, false);
  });

  test('the budget is whole again when the window ends', async () => {
    const c = clock();
    const budget = createMemoryRateBudget({ points: 5, windowSeconds: 60, now: c.now });
    await budget.charge('k', 5);
    assert.equal((await budget.charge('k', 1)).allowed, false);
    c.advance(59_999);
    assert.equal((await budget.charge('k', 1)).allowed, false);
    c.advance(1);
    const renewed = await budget.charge('k', 1);
    assert.equal(renewed.allowed, true);
    assert.equal(renewed.remaining, 4);
    assert.equal(renewed.resetSeconds, 60);
  });

  test('clients have separate budgets', async () => {
    const budget = createMemoryRateBudget({ points: 5, windowSeconds: 60 });
    await budget.charge('sub:alice', 5);
    assert.equal((await budget.charge('sub:alice', 1)).allowed, false);
    assert.equal((await budget.charge('sub:bob', 1)).allowed, true);
  });

  test('remembers at most maxKeys clients, forgetting the oldest window first', async () => {
    const budget = createMemoryRateBudget({ points: 5, windowSeconds: 60, maxKeys: 2 });
    await budget.charge('a', 5);
    await budget.charge('b', 5);
    await budget.charge('c', 5);
    assert.equal((await budget.charge('b', 1)).allowed, false, 'b is still remembered');
    assert.equal((await budget.charge('a', 1)).allowed, true, 'a was forgotten: a fresh window');
  });

  test('without Redis, createRateBudget counts in process', async () => {
    const budget = createRateBudget({ points: 2, windowSeconds: 60 });
    assert.equal((await budget.charge('k', 2)).allowed, true);
    assert.equal((await budget.charge('k', 1)).allowed, false);
    await budget.close();
  });
});

describe('rate budget keys and headers', () => {
  const alice = { kind: 'user', subject: 'alice', scopes: new Set<string>(), roles: new Set<string>() } as const;

  test('the key is the subject, else the client id, else the address', () => {
    assert.equal(clientKey(alice, '10.0.0.1', 'orders-web'), 'sub:alice');
    assert.equal(clientKey(ANONYMOUS, '10.0.0.1', 'orders-web'), 'client:orders-web');
    assert.equal(clientKey(ANONYMOUS, '10.0.0.1'), 'ip:10.0.0.1');
  });

  test('RateLimit fields in the structured form of the IETF draft; Retry-After only when refused', () => {
    const charge = { allowed: true, limit: 5000, remaining: 4987, resetSeconds: 3120, windowSeconds: 3600 };
    assert.deepEqual(rateLimitHeaders(charge), {
      'RateLimit-Policy': '"orders";q=5000;w=3600',
      RateLimit: '"orders";r=4987;t=3120',
    });
    assert.equal(rateLimitHeaders({ ...charge, allowed: false, remaining: 0 })['Retry-After'], '3120');
  });
});
