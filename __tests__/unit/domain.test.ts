// The unit tests of the domain, the auth rules and the HTTP helpers, in one Jest file: a file loads its modules into a
// fresh context and costs about 1.5 s of CPU before its first test (docs/testing.md#how-long-it-takes). Each top-level
// describe block below was a test file of its own, named after it (the comment above it gives the old file name), with
// its tests unchanged.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import pg from 'pg';
import { execute, type ExecutionResult, getOperationAST, type GraphQLSchema, parse } from 'graphql';
import { outcomeOf, satisfies } from '../../src/auth/idp/signInMethods.js';
import { createSigninThrottle, SIGNIN_LIMITS, signinDelayMs } from '../../src/auth/idp/signinThrottle.js';
import { ARGON2_PARAMS, argon2Params, hashPassword } from '../../src/auth/idp/users.js';
import { normalizedUri } from '../../src/auth/uriNormalization.js';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { DomainError } from '../../src/domain/errors.js';
import { orderEtag } from '../../src/domain/etags.js';
import { isValidIdempotencyKey } from '../../src/domain/idempotencyKey.js';
import { ID_PATTERN, newId } from '../../src/domain/ids.js';
import { ORDER_STATUSES, type OrderStatus } from '../../src/domain/model.js';
import { assertTransition, priceLines } from '../../src/domain/orders.js';
import { ACR, ANONYMOUS, meetsStepUp, requireStepUp, type StepUpRule, type User } from '../../src/domain/policy.js';
import { safeReturnTo } from '../../src/http/browser/signIn.js';
import {
  authCookies,
  isForeignOrigin,
  readCookie,
  serializeCookie,
  trustedOrigins,
} from '../../src/http/middleware/cookies.js';
import { clientIp as ipOf, isTrustedPeer, proxyTrust } from '../../src/http/middleware/index.js';
import {
  clientKey,
  createMemoryRateBudget,
  createRateBudget,
  rateLimitHeaders,
} from '../../src/http/middleware/rateBudget.js';
import { operationCost } from '../../src/http/pipeline/cost.js';
import { createJitExecutor } from '../../src/http/pipeline/jitExecutor.js';
import { limitErrors } from '../../src/http/pipeline/limits.js';
import { pointsFor } from '../../src/http/pipeline/pipeline.js';
import { formatResult } from '../../src/http/problems/graphqlErrors.js';
import { boundedStream } from '../../src/http/realtime/index.js';
import { createLogger } from '../../src/logger.js';
import { DateTime } from '../../src/resolvers/DateTime.js';
import { buildSchema } from '../../src/resolvers/schema.js';
import { memoryAttemptCounters } from '../../src/store/attemptCounters.js';
import { customerBySubject, customersByIds } from '../../src/store/customers.js';
import type { Database, Queryable } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { openDatabase } from '../../src/store/open.js';
import { findOrder, itemsOfOrders, listOrders } from '../../src/store/orders.js';
import { allProducts } from '../../src/store/products.js';
import { customerRows, orderItemRows, orderRows, productRows, RowShapeError } from '../../src/store/rows.js';
import { isoTimestamp } from '../../src/store/timestamps.js';
import { blockedBecause } from '../../src/webhooks/index.js';
import { testDatabase } from '../helpers/testRun.js';

// ─── was __tests__/unit/orders.test.ts ───
describe('orders', () => {
  const codeOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (error) {
      assert.ok(error instanceof DomainError);
      return error.code;
    }
    return 'OK';
  };

  describe('order rules', () => {
    test('allows exactly the documented transitions', () => {
      const allowed = new Set([
        'pending>paid',
        'paid>shipped',
        'shipped>delivered',
        'pending>cancelled',
        'paid>cancelled',
      ]);
      for (const from of ORDER_STATUSES) {
        for (const to of ORDER_STATUSES) {
          const expected = allowed.has(`${from}>${to}`) ? 'OK' : 'INVALID_TRANSITION';
          assert.equal(
            codeOf(() => assertTransition(from as OrderStatus, to)),
            expected,
            `${from} → ${to}`,
          );
        }
      }
      assert.equal(
        codeOf(() => assertTransition('pending', 'refunded')),
        'BAD_USER_INPUT',
      );
    });

    test('prices lines from the catalogue and totals them', () => {
      const prices = new Map([
        ['A', 250],
        ['B', 1000],
      ]);
      assert.deepEqual(
        priceLines(
          [
            { sku: 'A', qty: 4 },
            { sku: 'B', qty: 1 },
          ],
          prices,
        ),
        {
          lines: [
            { sku: 'A', qty: 4, unitPriceCents: 250 },
            { sku: 'B', qty: 1, unitPriceCents: 1000 },
          ],
          totalCents: 2000,
        },
      );
    });

    test('refuses totals that do not fit a GraphQL Int', () => {
      const prices = new Map([['GOLD', 2_000_000_000]]);
      assert.equal(
        codeOf(() => priceLines([{ sku: 'GOLD', qty: 2 }], prices)),
        'BAD_USER_INPUT',
      );
    });

    test('refuses more than 100 lines and fractional quantities', () => {
      const prices = new Map([['A', 1]]);
      const many = Array.from({ length: 101 }, () => ({ sku: 'A', qty: 1 }));
      assert.equal(
        codeOf(() => priceLines(many, prices)),
        'BAD_USER_INPUT',
      );
      assert.equal(
        codeOf(() => priceLines([{ sku: 'A', qty: 1.5 }], prices)),
        'BAD_USER_INPUT',
      );
    });
  });

  describe('ids and etags', () => {
    test('ids are prefixed and sort by creation time', () => {
      const earlier = newId('ord', Date.UTC(2026, 0, 1));
      const later = newId('ord', Date.UTC(2026, 0, 2));
      assert.match(earlier, ID_PATTERN);
      assert.match(newId('cus'), /^cus_/);
      assert.ok(earlier < later);
    });

    test('an etag names one version of one order', () => {
      assert.equal(orderEtag({ id: 'ord_x', version: 7 }), '"ord_x.v7"');
      assert.notEqual(orderEtag({ id: 'ord_x', version: 8 }), orderEtag({ id: 'ord_x', version: 7 }));
    });

    test('idempotency keys are 1 to 255 visible ASCII characters', () => {
      assert.equal(isValidIdempotencyKey('8e03978e-40d5-43e8-bc93-6894a57f9324'), true);
      assert.equal(isValidIdempotencyKey('k'.repeat(255)), true);
      assert.equal(isValidIdempotencyKey('k'.repeat(256)), false);
      assert.equal(isValidIdempotencyKey(''), false);
      assert.equal(isValidIdempotencyKey('has space'), false);
      assert.equal(isValidIdempotencyKey('tab\there'), false);
    });
  });
});

// ─── was __tests__/unit/rate-budget.test.ts ───
describe('rate-budget', () => {
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
});

// ─── was __tests__/unit/signin-throttle.test.ts ───
describe('signin-throttle', () => {
  const quiet = { warn() {}, info() {} };

  function clock(start = 5_000_000) {
    let t = start;
    return { now: () => t, advance: (ms: number) => (t += ms) };
  }

  describe('sign-in throttle (in process)', () => {
    test('the first failures are free, later ones are delayed, then the username locks', async () => {
      const throttle = createSigninThrottle({ namespace: 't', logger: quiet, now: clock().now });
      const verdicts = [];
      for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter + 1; i++)
        verdicts.push(await throttle.begin('alice', '10.0.0.1'));
      const free = verdicts.slice(0, SIGNIN_LIMITS.user.delayAfter);
      const delayed = verdicts.slice(SIGNIN_LIMITS.user.delayAfter, SIGNIN_LIMITS.user.lockAfter);
      assert.ok(free.every((v) => !v.locked && v.delayMs === 0));
      assert.ok(delayed.every((v) => !v.locked && v.delayMs === SIGNIN_LIMITS.delayMs));
      assert.deepEqual(verdicts.at(-1), { locked: true, retryAfterSeconds: SIGNIN_LIMITS.lockSeconds });
    });

    test('development and production delay a slowed attempt by 1 s; only NODE_ENV=test waits less', async () => {
      assert.equal(SIGNIN_LIMITS.delayMs, 1000);
      assert.equal(signinDelayMs('production'), 1000);
      assert.equal(signinDelayMs('development'), 1000);
      const short = signinDelayMs('test');
      assert.ok(short > 0 && short < 1000, `${short} ms`);
      // The delay given is the delay a slowed attempt gets.
      const throttle = createSigninThrottle({ namespace: 't', logger: quiet, delayMs: short });
      for (let i = 0; i < SIGNIN_LIMITS.user.delayAfter; i++) await throttle.begin('dave', '10.0.0.1');
      assert.deepEqual(await throttle.begin('dave', '10.0.0.1'), { locked: false, delayMs: short });
    });

    test('names are compared trimmed and lower-cased, as the user table does', async () => {
      const throttle = createSigninThrottle({ namespace: 't', logger: quiet });
      for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter; i++)
        await throttle.begin(i % 2 ? 'Alice ' : 'alice', `10.0.0.${i}`);
      assert.equal((await throttle.begin('ALICE', '10.9.9.9')).locked, true);
    });

    test('the lock ends after its duration, and the count starts again', async () => {
      const c = clock();
      const throttle = createSigninThrottle({ namespace: 't', logger: quiet, lockSeconds: 30, now: c.now });
      for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter; i++) await throttle.begin('bob', '10.0.0.1');
      assert.deepEqual(await throttle.begin('bob', '10.0.0.2'), { locked: true, retryAfterSeconds: 30 });
      c.advance(29_000);
      assert.deepEqual(await throttle.begin('bob', '10.0.0.2'), { locked: true, retryAfterSeconds: 1 });
      c.advance(1_000);
      assert.deepEqual(await throttle.begin('bob', '10.0.0.2'), { locked: false, delayMs: 0 });
    });

    test('a success resets the username and gives the address its attempt back', async () => {
      const throttle = createSigninThrottle({ namespace: 't', logger: quiet });
      for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter - 1; i++) await throttle.begin('carol', '10.0.0.1');
      await throttle.begin('carol', '10.0.0.1');
      await throttle.succeeded('carol', '10.0.0.1');
      for (let i = 0; i < SIGNIN_LIMITS.user.delayAfter; i++) {
        assert.deepEqual(await throttle.begin('carol', '10.0.0.1'), { locked: false, delayMs: 0 });
      }
    });

    test('passwords and second factors are counted apart, whatever name the sign-in form is given', async () => {
      const throttle = createSigninThrottle({ namespace: 't', logger: quiet });
      for (const name of ['second-factor:carol', 'f:carol', 'carol']) {
        for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter; i++) await throttle.begin(name, `10.1.${i}.1`);
      }
      assert.equal((await throttle.begin('carol', '10.2.0.1')).locked, true);
      assert.deepEqual(await throttle.begin('carol', '10.2.0.1', 'second-factor'), { locked: false, delayMs: 0 });
      // And the other way: a locked second factor leaves the password alone.
      for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter; i++)
        await throttle.begin('dave', `10.3.${i}.1`, 'second-factor');
      assert.equal((await throttle.begin('dave', '10.4.0.1', 'second-factor')).locked, true);
      assert.deepEqual(await throttle.begin('dave', '10.4.0.1'), { locked: false, delayMs: 0 });
    });

    test('one address trying many names is slowed, then locked, whatever the name', async () => {
      const throttle = createSigninThrottle({ namespace: 't', logger: quiet });
      const verdicts = [];
      for (let i = 0; i < SIGNIN_LIMITS.ip.lockAfter + 1; i++)
        verdicts.push(await throttle.begin(`user${i}`, '10.6.6.6'));
      assert.deepEqual(verdicts[SIGNIN_LIMITS.ip.delayAfter - 1], { locked: false, delayMs: 0 });
      assert.deepEqual(verdicts[SIGNIN_LIMITS.ip.delayAfter], { locked: false, delayMs: SIGNIN_LIMITS.delayMs });
      assert.equal(verdicts.at(-1)!.locked, true);
      assert.equal((await throttle.begin('someone-else', '10.6.6.6')).locked, true);
      assert.equal((await throttle.begin('someone-else', '10.7.7.7')).locked, false);
    });
  });

  describe('attempt counters (in process)', () => {
    test('a locked key refuses without counting; expired counts are forgotten', async () => {
      const c = clock();
      const counters = memoryAttemptCounters({ now: c.now });
      const keys = [{ key: 'a', limit: 2 }];
      assert.deepEqual(await counters.hit(keys, 1000, 5000), { locked: false, counts: [1] });
      c.advance(999);
      assert.deepEqual(await counters.hit(keys, 1000, 5000), { locked: false, counts: [2] });
      assert.deepEqual(await counters.hit(keys, 1000, 5000), { locked: true, retryMs: 5000 });
      c.advance(5000);
      assert.deepEqual(await counters.hit(keys, 1000, 5000), { locked: false, counts: [1] });
      c.advance(1000);
      assert.deepEqual(await counters.hit(keys, 1000, 5000), { locked: false, counts: [1] });
    });

    test('remembers at most maxKeys names', async () => {
      const counters = memoryAttemptCounters({ maxKeys: 2 });
      for (const key of ['a', 'b', 'c']) await counters.hit([{ key, limit: 1 }], 60_000, 60_000);
      assert.equal((await counters.hit([{ key: 'c', limit: 1 }], 60_000, 60_000)).locked, true);
      assert.equal((await counters.hit([{ key: 'a', limit: 1 }], 60_000, 60_000)).locked, false, 'a was forgotten');
    });
  });
});

// ─── was __tests__/unit/step-up-rule.test.ts ───
describe('step-up-rule', () => {
  const NOW = Date.parse('2026-11-22T09:30:00Z');
  const RULE: StepUpRule = { acrValues: [ACR.mfa], maxAgeSeconds: 900 };
  const carol = (claims: Partial<Pick<User, 'acr' | 'authTime'>>): User => ({
    kind: 'user',
    subject: 'carol',
    scopes: new Set(['orders:read', 'orders:write']),
    roles: new Set(['staff']),
    ...claims,
  });

  /** What requireStepUp says: OK, or its code, message and challenge. */
  function verdict(user: User, rule: StepUpRule | null = RULE) {
    try {
      requireStepUp(user, rule, NOW);
      return 'OK';
    } catch (error) {
      assert.ok(error instanceof DomainError);
      return { code: error.code, message: error.message, stepUp: error.details.stepUp };
    }
  }

  describe('the step-up rule (RFC 9470)', () => {
    test('auth_time at exactly max_age is recent enough; one millisecond past it is not', () => {
      assert.equal(verdict(carol({ acr: ACR.mfa, authTime: NOW - 900_000 })), 'OK');
      assert.deepEqual(verdict(carol({ acr: ACR.mfa, authTime: NOW - 900_001 })), {
        code: 'INSUFFICIENT_USER_AUTHENTICATION',
        message: 'Staff changes need a sign-in within the last 900 seconds; sign in again with a second factor.',
        stepUp: { acrValues: ACR.mfa, maxAge: 900 },
      });
      // An issuer whose clock runs ahead: a sign-in "in the future" counts as just now.
      assert.equal(verdict(carol({ acr: ACR.mfa, authTime: NOW + 5_000 })), 'OK');
    });

    test('an acr not among the accepted values, or none, is weaker whatever its age; no auth_time is never recent', () => {
      const weaker = {
        code: 'INSUFFICIENT_USER_AUTHENTICATION',
        message:
          'Staff changes need a sign-in with a second factor; sign in again with acr_values and max_age as given.',
        stepUp: { acrValues: ACR.mfa, maxAge: 900 },
      };
      assert.deepEqual(verdict(carol({ acr: ACR.password, authTime: NOW })), weaker);
      assert.deepEqual(verdict(carol({ authTime: NOW })), weaker);
      assert.deepEqual(verdict(carol({ acr: `${ACR.mfa} `, authTime: NOW })), weaker);
      assert.equal((verdict(carol({ acr: ACR.mfa })) as { message: string }).message.includes('900 seconds'), true);
    });

    test('several accepted values (in preference order) are all accepted and all named; off accepts anything', () => {
      const rule: StepUpRule = { acrValues: ['gold', 'silver'], maxAgeSeconds: 60 };
      assert.equal(verdict(carol({ acr: 'silver', authTime: NOW }), rule), 'OK');
      assert.deepEqual((verdict(carol({ acr: 'bronze', authTime: NOW }), rule) as { stepUp: unknown }).stepUp, {
        acrValues: 'gold silver',
        maxAge: 60,
      });
      assert.equal(verdict(carol({}), null), 'OK');
      assert.equal(meetsStepUp(carol({}), null), true);
      assert.equal(meetsStepUp(carol({ acr: ACR.mfa, authTime: NOW }), RULE, NOW), true);
    });

    test('amr adds up to acr: two factors, or a passkey that verified its user, are MFA', () => {
      assert.deepEqual(outcomeOf(['pwd']), { acr: ACR.password, amr: ['pwd'] });
      assert.deepEqual(outcomeOf(['pwd', 'otp']), { acr: ACR.mfa, amr: ['pwd', 'otp', 'mfa'] });
      assert.deepEqual(outcomeOf(['pwd', 'hwk', 'user']), { acr: ACR.mfa, amr: ['pwd', 'hwk', 'user', 'mfa'] });
      assert.deepEqual(outcomeOf(['hwk', 'user']), { acr: ACR.password, amr: ['hwk', 'user'] });
      assert.deepEqual(outcomeOf(['swk', 'user'], true), { acr: ACR.mfa, amr: ['swk', 'user', 'mfa'] });
      // A session's earlier `mfa` is not carried over: only the methods count.
      assert.deepEqual(outcomeOf(['pwd', 'mfa', 'bogus']), { acr: ACR.password, amr: ['pwd'] });
    });

    test('the embedded IdP asks again only for a level above the session’s: a stronger sign-in satisfies a weaker request', () => {
      assert.equal(satisfies(ACR.mfa, [ACR.password]), true);
      assert.equal(satisfies(ACR.password, [ACR.mfa]), false);
      assert.equal(satisfies(ACR.password, [ACR.mfa, ACR.password]), true);
      assert.equal(satisfies(undefined, [ACR.password]), false);
      // Levels it does not issue cannot be had by asking again.
      assert.equal(satisfies(ACR.password, ['urn:example:acr:gold']), true);
    });
  });
});

// ─── was __tests__/unit/password-hashing.test.ts ───
describe('password-hashing', () => {
  describe('password hashing cost', () => {
    test('development and production keep the OWASP Argon2id baseline: 19 MiB, 2 passes, 1 lane', async () => {
      for (const env of ['development', 'production'] as const) {
        assert.deepEqual(argon2Params(env), { memoryCost: 19456, timeCost: 2, parallelism: 1 });
        assert.match(await hashPassword('alice', argon2Params(env)), /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
      }
      assert.match(await hashPassword('alice'), /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/, 'the default is the baseline');
      assert.deepEqual(ARGON2_PARAMS, argon2Params('production'));
    });

    test('only NODE_ENV=test hashes cheaply', async () => {
      const cheap = argon2Params('test');
      assert.ok(cheap.memoryCost < ARGON2_PARAMS.memoryCost && cheap.timeCost < ARGON2_PARAMS.timeCost);
      assert.match(await hashPassword('alice', cheap), /^\$argon2id\$v=19\$m=1024,t=1,p=1\$/);
    });
  });
});

// ─── was __tests__/unit/database-rows.test.ts ───
describe('database-rows', () => {
  /**
   * Rows are checked where they enter the program: once per result set, from its row description (column names and
   * type OIDs), with what the description cannot prove (an order's status, a timestamp's form) checked on each row, and
   * nullability left to the `not null` constraints checked here against the catalogue. A drifted schema fails loudly.
   * On the embedded database, and on PostgreSQL too (a schema of its own) when DATABASE_URL is set: the drivers
   * describe results each their own way.
   */
  const ROWS = `
    insert into customers (id, subject, name, email) values ('cus_rows1', null, 'Row Customer', null);
    insert into orders (id, customer_id, status, total_cents, version, created_at, updated_at)
      values ('ord_rows1', 'cus_rows1', 'paid', 1250, 3, '2026-11-22 09:30:00.123456+00', '2026-11-22 09:31:00+00');
    insert into order_items (order_id, line_no, sku, qty, unit_price_cents) values ('ord_rows1', 1, 'KB-001', 2, 500);
  `;
  const ORDER = {
    id: 'ord_rows1',
    customerId: 'cus_rows1',
    status: 'paid',
    totalCents: 1250,
    version: 3,
    createdAt: '2026-11-22T09:30:00.123Z',
    updatedAt: '2026-11-22T09:31:00.000Z',
  };

  async function openPostgresSchema(url: string): Promise<{ db: Database; drop: () => Promise<void> }> {
    const schema = `test_${randomBytes(6).toString('hex')}`;
    const db = await openDatabase({ kind: 'postgres', url, schema });
    await migrate(db);
    await db.query(`insert into products (sku, name, price_cents) values ('KB-001', 'Mechanical keyboard', 8900)`);
    return {
      db,
      async drop() {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        await client.query(`drop schema if exists "${schema}" cascade`);
        await client.end();
      },
    };
  }

  const engines: [string, () => Promise<{ db: Database; drop: () => Promise<void> }>][] = [
    ['the embedded database', async () => ({ db: await testDatabase(), drop: async () => undefined })],
  ];
  const url = process.env.DATABASE_URL;
  if (url) engines.push(['PostgreSQL', () => openPostgresSchema(url)]);

  const ROLLBACK = new Error('rolled back');

  describe.each(engines)('database rows on %s', (_engine, open) => {
    let db: Database;
    let drop: () => Promise<void>;
    beforeAll(async () => {
      ({ db, drop } = await open());
      for (const sql of ROWS.trim().split(';\n')) await db.query(sql);
    });
    afterAll(async () => {
      await db.close();
      await drop();
    });

    // Each drift is read through a statement this file sends nowhere else: PostgreSQL refuses a named prepared
    // statement whose result type a change of schema altered ("cached plan must not change result type") before the
    // rows could be checked, which is loud too, but not what is shown here.

    /** Runs `fn` on a schema changed by `ddl`, in a transaction that is rolled back. */
    async function drifted(ddl: readonly string[], fn: (tx: Queryable) => Promise<void>): Promise<void> {
      await assert.rejects(
        db.transaction(async (tx) => {
          for (const sql of ddl) await tx.query(sql);
          await fn(tx);
          throw ROLLBACK;
        }),
        (error) => error === ROLLBACK,
      );
    }

    test('rows as the driver gives them read as the domain model', async () => {
      assert.deepEqual(await findOrder(db, 'ord_rows1'), ORDER);
      assert.equal(await findOrder(db, 'ord_none'), null);
      assert.deepEqual(await customersByIds(db, ['cus_rows1']), [
        { id: 'cus_rows1', subject: null, name: 'Row Customer', email: null },
      ]);
      assert.deepEqual(await itemsOfOrders(db, ['ord_rows1']), [
        { orderId: 'ord_rows1', lineNo: 1, sku: 'KB-001', qty: 2, unitPriceCents: 500 },
      ]);
      assert.deepEqual(
        (await allProducts(db)).find((p) => p.sku === 'KB-001'),
        {
          sku: 'KB-001',
          name: 'Mechanical keyboard',
          priceCents: 8900,
        },
      );
    });

    test('rows come as arrays in the order of their columns, and a reader takes its columns in any order', async () => {
      const result = await db.queryResult(
        'select updated_at, status, id, version, created_at, total_cents, customer_id from orders where id = $1',
        ['ord_rows1'],
      );
      assert.deepEqual(result.rows, [[ORDER.updatedAt, 'paid', 'ord_rows1', 3, ORDER.createdAt, 1250, 'cus_rows1']]);
      assert.deepEqual(orderRows.first(result), ORDER);
      assert.deepEqual(orderRows.all(result), [ORDER]);
    });

    test('every column a reader reads as non-null is `not null` in the migrated schema', async () => {
      for (const reader of [orderRows, orderItemRows, customerRows, productRows]) {
        const rows = await db.query<{ column_name: string }>(
          `select column_name from information_schema.columns
           where table_schema = current_schema() and table_name = $1 and is_nullable = 'NO'`,
          [reader.table],
        );
        const notNull = new Set(rows.map((r) => r.column_name));
        assert.deepEqual(
          reader.nonNull.filter((column) => !notNull.has(column)),
          [],
          reader.table,
        );
      }
    });

    test('a retyped column fails on the first result, even an empty one, naming the column and its type', async () => {
      await drifted(['alter table orders alter column total_cents type bigint'], async (tx) => {
        await assert.rejects(
          listOrders(tx, { customerId: 'cus_none', limit: 5 }),
          new RowShapeError(
            'order rows do not have the shape store/rows.ts reads: column "total_cents" has type OID 20, not smallint or ' +
              'integer (21 or 23) (the result has id (25), customer_id (25), status (25), total_cents (20), version (23), ' +
              'created_at (1184), updated_at (1184))',
          ),
        );
      });
      await drifted(['alter table customers alter column name type jsonb using to_jsonb(name)'], async (tx) => {
        await assert.rejects(
          customerBySubject(tx, 'no-such-subject'),
          (error: Error) =>
            error instanceof RowShapeError && /column "name" has type OID 3802, not text/.test(error.message),
        );
      });
    });

    test('a renamed or missing column fails loudly: PostgreSQL itself refuses the statement', async () => {
      await drifted(['alter table orders rename column status to state'], async (tx) => {
        await assert.rejects(findOrder(tx, 'ord_rows1'), { code: '42703', message: 'column "status" does not exist' });
      });
      await drifted(['alter table order_items drop column qty'], async (tx) => {
        await assert.rejects(itemsOfOrders(tx, ['ord_rows1']), {
          code: '42703',
          message: 'column "qty" does not exist',
        });
      });
    });

    test('what the description cannot prove is checked on each row, naming the value', async () => {
      await drifted(
        [
          'alter table orders drop constraint orders_status_check',
          `update orders set status = 'refunded' where id = 'ord_rows1'`,
        ],
        async (tx) => {
          await assert.rejects(
            findOrder(tx, 'ord_rows1'),
            new RowShapeError('order row: status "refunded" is not an order status'),
          );
        },
      );
      await drifted([`update orders set updated_at = 'infinity' where id = 'ord_rows1'`], async (tx) => {
        await assert.rejects(
          findOrder(tx, 'ord_rows1'),
          new RowShapeError('order row: timestamp "infinity" is not in the API form'),
        );
      });
      await drifted(
        [
          'alter table customers alter column name drop not null',
          `update customers set name = null where id = 'cus_rows1'`,
        ],
        async (tx) => {
          await assert.rejects(
            customersByIds(tx, ['cus_rows1']),
            (error: Error) =>
              error instanceof RowShapeError && /column "name" reads as null, not string/.test(error.message),
          );
        },
      );
    });
  });

  test.each([
    ['2026-11-22 09:30:00.123456+00', '2026-11-22T09:30:00.123Z'],
    ['2026-11-22 09:30:00.1239+00', '2026-11-22T09:30:00.123Z'],
    ['2026-11-22 09:30:00.123+00', '2026-11-22T09:30:00.123Z'],
    ['2026-11-22 09:30:00.12+00', '2026-11-22T09:30:00.120Z'],
    ['2026-11-22 09:30:00.1+00', '2026-11-22T09:30:00.100Z'],
    ['2026-11-22 09:30:00+00', '2026-11-22T09:30:00.000Z'],
    ['2026-11-22 10:30:00.5+01', '2026-11-22T09:30:00.500Z'],
    ['infinity', 'infinity'],
  ])('PostgreSQL writes a timestamptz as %s; the API reads it as %s', (text, iso) => {
    assert.equal(isoTimestamp(text), iso);
  });
});

// ─── was __tests__/unit/auth-cookies.test.ts ───
describe('auth-cookies', () => {
  describe('browser sign-in cookies', () => {
    test('over https the session cookie is __Host- prefixed and Secure', () => {
      const names = authCookies('https://orders.example.com');
      assert.deepEqual(names, { secure: true, session: '__Host-orders_session', login: '__Secure-orders_login' });
      assert.equal(
        serializeCookie(names.session, 'v', { path: '/', maxAge: 43200, secure: names.secure }),
        '__Host-orders_session=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=43200; Secure',
      );
    });

    test('over plain http (development) the cookies have no prefix and no Secure', () => {
      assert.deepEqual(authCookies('http://localhost:4000'), {
        secure: false,
        session: 'orders_session',
        login: 'orders_login',
      });
    });

    test('reads one cookie, and none when the name is sent twice (a planted duplicate)', () => {
      assert.equal(readCookie('a=1; orders_session=abc; b=2', 'orders_session'), 'abc');
      assert.equal(readCookie('xorders_session=abc', 'orders_session'), undefined);
      assert.equal(readCookie('orders_session=abc; orders_session=def', 'orders_session'), undefined);
      assert.equal(readCookie(undefined, 'orders_session'), undefined);
    });

    test('trusts the public origin and the CORS origins, nothing else', () => {
      const trusted = trustedOrigins('https://orders.example.com/base', ['https://shop.example.com']);
      assert.equal(isForeignOrigin(undefined, trusted), false);
      assert.equal(isForeignOrigin('https://orders.example.com', trusted), false);
      assert.equal(isForeignOrigin('https://shop.example.com', trusted), false);
      assert.equal(isForeignOrigin('https://evil.example', trusted), true);
      assert.equal(isForeignOrigin('null', trusted), true);
    });
  });

  describe('returnTo', () => {
    const publicUrl = 'https://orders.example.com';

    test('keeps paths on this origin', () => {
      assert.equal(safeReturnTo(undefined, publicUrl), '/');
      assert.equal(safeReturnTo('/orders?page=2#top', publicUrl), '/orders?page=2#top');
      assert.equal(safeReturnTo('/a/../b', publicUrl), '/b');
    });

    test('refuses anything that could leave it', () => {
      for (const value of [
        'https://evil.example/',
        '//evil.example',
        '/\\evil.example',
        '\\\\evil.example',
        'evil.example',
        'javascript:alert(1)',
        '/\tevil',
        ['/a', '/b'],
        '/' + 'a'.repeat(2048),
      ]) {
        assert.equal(safeReturnTo(value, publicUrl), null, JSON.stringify(value));
      }
    });
  });
});

// ─── was __tests__/unit/uri-normalization.test.ts ───
describe('uri-normalization', () => {
  describe('URIs compare as RFC 3986 §6.2.2 and §6.2.3 normalize them', () => {
    const same = (a: string, b: string) => assert.equal(normalizedUri(a)?.href, normalizedUri(b)?.href, `${a} ≡ ${b}`);
    const differ = (a: string, b: string) =>
      assert.notEqual(normalizedUri(a)?.href, normalizedUri(b)?.href, `${a} ≢ ${b}`);

    test('an empty http(s) path is "/", and the default port is no port (§6.2.3)', () => {
      same('http://127.0.0.1:4150', 'http://127.0.0.1:4150/');
      same('https://api.example.com', 'https://api.example.com:443/');
      same('http://api.example.com:80', 'http://api.example.com/');
      differ('http://api.example.com:8080', 'http://api.example.com/');
    });

    test('scheme and host are case-insensitive, the path is not (§6.2.2.1)', () => {
      same('HTTPS://API.Example.COM/orders', 'https://api.example.com/orders');
      same('URN:orders-api', 'urn:orders-api');
      differ('https://api.example.com/Orders', 'https://api.example.com/orders');
    });

    test('percent-encoded unreserved characters are those characters; other escapes are case-insensitive (§6.2.2.2)', () => {
      same('https://api.example.com/%7Eorders', 'https://api.example.com/~orders');
      same('https://api.example.com/%41', 'https://api.example.com/A');
      same('https://api.example.com/a%2fb', 'https://api.example.com/a%2Fb');
      differ('https://api.example.com/a%2Fb', 'https://api.example.com/a/b');
      assert.equal(normalizedUri('https://api.example.com/a%2fb%7e')?.href, 'https://api.example.com/a%2Fb~');
    });

    test('dot segments are removed (§6.2.2.3)', () => {
      same('https://api.example.com/a/./b/../c', 'https://api.example.com/a/c');
      same('http://127.0.0.1:4150/./', 'http://127.0.0.1:4150');
    });

    test('what is not an absolute URI has no normal form', () => {
      assert.equal(normalizedUri('orders-api'), null);
      assert.equal(normalizedUri('/relative/path'), null);
      assert.equal(normalizedUri(''), null);
    });
  });
});

// ─── was __tests__/unit/webhook-addresses.test.ts ───
describe('webhook-addresses', () => {
  describe('webhook targets: IPv6 forms that carry an IPv4 address are judged by that address', () => {
    test('each embedding of a loopback or private IPv4 address is refused, naming the form and the address', () => {
      for (const [address, why] of [
        ['::ffff:127.0.0.1', 'the IPv4-mapped form of 127.0.0.1, a loopback address'],
        ['::ffff:7f00:1', 'the IPv4-mapped form of 127.0.0.1, a loopback address'],
        ['::7f00:1', 'the IPv4-compatible form of 127.0.0.1, a loopback address'],
        ['::127.0.0.1', 'the IPv4-compatible form of 127.0.0.1, a loopback address'],
        ['::ffff:0:7f00:1', 'the IPv4-translated (SIIT) form of 127.0.0.1, a loopback address'],
        ['::ffff:0:10.0.0.1', 'the IPv4-translated (SIIT) form of 10.0.0.1, a private address'],
        ['64:ff9b::a9fe:a9fe', 'the NAT64 form of 169.254.169.254, a link-local (cloud metadata) address'],
        ['64:ff9b::192.168.0.1', 'the NAT64 form of 192.168.0.1, a private address'],
        ['2002:7f00:1::1', 'the 6to4 form of 127.0.0.1, a loopback address'],
        ['2002:a00:1:ffff::', 'the 6to4 form of 10.0.0.1, a private address'],
        // Teredo: the server's address in clear, the client's with every bit inverted.
        ['2001:0:7f00:1::', 'the Teredo form of 127.0.0.1, a loopback address'],
        ['2001:0:cb00:710b:0:0:f5ff:fffe', 'the Teredo form of 10.0.0.1, a private address'],
        ['::ffff:0.0.0.1', 'the IPv4-mapped form of 0.0.0.1, a this network address'],
      ] as const) {
        assert.equal(blockedBecause(address), why, address);
      }
    });

    test('a local-use NAT64 address is refused whole: where its IPv4 address sits is the operator’s choice', () => {
      assert.equal(blockedBecause('64:ff9b:1::808:808'), 'a local-use NAT64 address');
      assert.equal(blockedBecause('64:ff9b:1:ffff:ffff::'), 'a local-use NAT64 address');
      assert.equal(blockedBecause('64:ff9b:2::1'), null, 'just past the /48');
    });

    test('an embedding of a public IPv4 address is as public as that address', () => {
      for (const address of [
        '::ffff:8.8.8.8',
        '::8.8.8.8',
        '::ffff:0:808:808',
        '64:ff9b::808:808',
        '2002:808:808::1',
        '2001:0:cb00:710b::f7f7:f7f7',
      ]) {
        assert.equal(blockedBecause(address), null, address);
      }
    });

    test('the IPv6 ranges of their own, and IPv4 itself, are unchanged', () => {
      assert.equal(blockedBecause('::1'), 'a loopback address');
      assert.equal(blockedBecause('::'), 'an unspecified address');
      assert.equal(blockedBecause('fd00:ec2::254'), 'a unique-local (fd00:ec2::254 is a metadata service) address');
      assert.equal(blockedBecause('fe80::1'), 'a link-local address');
      assert.equal(blockedBecause('127.0.0.1'), 'a loopback address');
      assert.equal(blockedBecause('2606:4700::1111'), null);
      assert.equal(blockedBecause('203.0.113.10'), null);
      assert.equal(blockedBecause('not-an-address'), 'not an IP address');
    });
  });
});

// ─── was __tests__/unit/stream-client-ip.test.ts ───
describe('stream-client-ip', () => {
  const clientIp = (req: IncomingMessage, setting: boolean | number | string[]) => ipOf(req, proxyTrust(setting));

  const upgrade = (peer: string, forwardedFor?: string) =>
    ({
      socket: { remoteAddress: peer },
      headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
    }) as unknown as IncomingMessage;

  describe('the client address of a WebSocket handshake, and which peers are trusted proxies (TRUST_PROXY)', () => {
    test('without a trusted proxy it is the peer, whatever X-Forwarded-For claims', () => {
      assert.equal(clientIp(upgrade('10.0.0.5', '203.0.113.7'), false), '10.0.0.5');
      assert.equal(clientIp(upgrade('10.0.0.5', '203.0.113.7'), 0), '10.0.0.5');
    });

    test('a hop count trusts that many proxies from the right, as Express does', () => {
      const req = upgrade('10.0.0.5', 'spoofed, 203.0.113.7, 10.0.0.9');
      assert.equal(clientIp(req, 1), '10.0.0.9');
      assert.equal(clientIp(req, 2), '203.0.113.7');
      assert.equal(clientIp(req, 9), 'spoofed');
    });

    test('true trusts every hop: the left-most address', () => {
      assert.equal(clientIp(upgrade('10.0.0.5', '203.0.113.7, 10.0.0.9'), true), '203.0.113.7');
      assert.equal(clientIp(upgrade('10.0.0.5'), true), '10.0.0.5');
    });

    test('addresses and subnets trust those peers alone: a spoofed X-Forwarded-For from any other peer earns nothing', () => {
      const list = ['127.0.0.1', '10.0.0.0/8'];
      assert.equal(clientIp(upgrade('127.0.0.1', '203.0.113.7'), list), '203.0.113.7');
      assert.equal(clientIp(upgrade('10.1.2.3', 'spoofed, 203.0.113.7, 10.0.0.9'), list), '203.0.113.7');
      assert.equal(clientIp(upgrade('127.0.0.2', '203.0.113.7'), list), '127.0.0.2');
      assert.equal(clientIp(upgrade('::ffff:127.0.0.2', '203.0.113.7'), list), '127.0.0.2');
      assert.equal(isTrustedPeer(proxyTrust(list), '127.0.0.1'), true);
      assert.equal(isTrustedPeer(proxyTrust(list), '127.0.0.2'), false);
      assert.equal(isTrustedPeer(proxyTrust(['loopback']), '127.0.0.2'), true);
      assert.equal(isTrustedPeer(proxyTrust(false), '127.0.0.1'), false);
      assert.equal(isTrustedPeer(proxyTrust(1), '192.0.2.1'), true);
    });
  });
});

// ─── was __tests__/unit/bounded-stream.test.ts ───
describe('bounded-stream', () => {
  describe('a subscriber buffer', () => {
    test('hands values to a waiting reader, then buffers up to the bound', async () => {
      const stream = boundedStream<number>(
        2,
        () => assert.fail('no overflow'),
        () => undefined,
      );
      const waiting = stream.iterator.next();
      stream.push(1);
      assert.deepEqual(await waiting, { value: 1, done: false });
      stream.push(2);
      stream.push(3);
      assert.deepEqual(await stream.iterator.next(), { value: 2, done: false });
      assert.deepEqual(await stream.iterator.next(), { value: 3, done: false });
    });

    test('a reader that falls more than the bound behind is cut off, once, and its buffer freed', async () => {
      let overflows = 0;
      let closes = 0;
      const stream = boundedStream<number>(
        3,
        () => overflows++,
        () => closes++,
      );
      for (let i = 0; i < 10; i++) stream.push(i);
      assert.equal(overflows, 1);
      assert.equal(closes, 1);
      assert.deepEqual(await stream.iterator.next(), { value: undefined, done: true });
    });

    test('return() ends the stream and releases whoever listens', async () => {
      let closes = 0;
      const stream = boundedStream<number>(
        3,
        () => undefined,
        () => closes++,
      );
      const pending = stream.iterator.next();
      await stream.iterator.return!();
      assert.deepEqual(await pending, { value: undefined, done: true });
      assert.equal(closes, 1);
    });
  });
});

// ─── was __tests__/unit/log-redaction.test.ts ───
describe('log-redaction', () => {
  const SECRET = 'Hunter2-SECRET-PW';

  /** The lines a logger at `level` writes. */
  function capture(level: 'debug' | 'info' = 'debug') {
    const lines: string[] = [];
    const logger = createLogger(level, { destination: { write: (line: string) => void lines.push(line) } });
    return { logger, lines };
  }

  /** An error as body-parser makes it: the raw body it refused rides along as `body`. */
  const bodyParserError = () =>
    Object.assign(new Error('too many parameters'), {
      type: 'parameters.too.many',
      status: 413,
      body: `username=carol&password=${SECRET}`,
    });

  describe('a logged error never carries what the client sent', () => {
    test('body and rawBody are dropped from err and error, at any depth, and the error itself is left as it was', () => {
      const { logger, lines } = capture();
      const top = bodyParserError();
      const nested = Object.assign(new Error('wrapped'), {
        original: bodyParserError(),
        details: { rawBody: Buffer.from(SECRET), body: SECRET, kept: 'visible' },
        cause: bodyParserError(),
      });
      const aggregate = new AggregateError([bodyParserError(), bodyParserError()], 'several');
      logger.error({ err: top }, 'one');
      logger.error({ err: nested }, 'nested');
      logger.error({ error: aggregate }, 'aggregate');
      logger.warn({ err: { body: SECRET, message: 'a plain object' } }, 'plain');
      assert.equal(lines.length, 4);
      assert.deepEqual(
        lines.filter((line) => line.includes(SECRET)),
        [],
      );
      const [one, wrapped] = lines.map((line) => JSON.parse(line) as { err: Record<string, unknown> });
      assert.deepEqual([one!.err.type, one!.err.message, one!.err.status], ['Error', 'too many parameters', 413]);
      assert.equal((wrapped!.err.details as Record<string, unknown>).kept, 'visible');
      assert.equal((wrapped!.err.original as Record<string, unknown>).message, 'too many parameters');
      assert.equal(top.body, `username=carol&password=${SECRET}`);
    });

    test('a password member is redacted wherever a logged object carries it', () => {
      const { logger, lines } = capture('info');
      logger.info({ form: { username: 'carol', password: SECRET } }, 'form');
      assert.equal(lines.length, 1);
      assert.doesNotMatch(lines[0]!, new RegExp(SECRET));
      assert.match(lines[0]!, /"password":"\[redacted\]"/);
    });
  });
});

// ─── was __tests__/unit/graphql-limits.test.ts ───
describe('graphql-limits', () => {
  const schema = buildSchema();
  const LIMITS = { maxDepth: 12, maxAliases: 15, maxDirectives: 50, maxMutations: 10 };

  const costOf = (query: string, variables: Record<string, unknown> = {}) => {
    const document = parse(query);
    return operationCost(schema, document, getOperationAST(document)!, variables);
  };

  describe('static cost of an operation', () => {
    test('objects cost 1, scalars 0, and a list multiplies its children by its page size', () => {
      assert.equal(costOf('{ recentOrders(first: 100) { id status customer { id name } } }'), 200);
      assert.equal(costOf('{ viewer { subject } }'), 1);
      assert.equal(costOf('{ __typename }'), 0);
    });

    test("the page size comes from the literal, the variable, or the schema's default, capped at 100", () => {
      assert.equal(costOf('{ recentOrders { customer { id } } }'), 40);
      assert.equal(costOf('query($n: Int) { recentOrders(first: $n) { customer { id } } }', { n: 7 }), 14);
      assert.equal(costOf('query($n: Int) { recentOrders(first: $n) { customer { id } } }'), 40);
      assert.equal(costOf('{ recentOrders(first: 5000) { customer { id } } }'), 200);
    });

    test('a mutation field costs 10 plus what it returns', () => {
      assert.equal(costOf('mutation { cancelOrder(id: "x") { id customer { id } } }'), 11);
    });

    test("the issue's 143-byte query costs about 102 million; fragments count like inline selections", () => {
      const fanOut =
        '{ recentOrders(first:100) { customer { orders(first:100) { customer { orders(first:100) { customer { orders(first:100) { id }}}}}}}}';
      assert.equal(costOf(fanOut), 102_020_200);
      const viaFragment = '{ recentOrders(first: 100) { ...O } } fragment O on Order { customer { id } }';
      assert.equal(costOf(viaFragment), 200);
    });

    test('the budget is spent in points of 100, at least one', () => {
      assert.deepEqual([0, 1, 100, 101, 200].map(pointsFor), [1, 1, 1, 2, 2]);
    });
  });

  describe('static limits', () => {
    const chained = (levels: number) =>
      `{ recentOrders { customer { ...F0 } } } ` +
      Array.from({ length: levels }, (_, i) =>
        i === levels - 1
          ? `fragment F${i} on Customer { id }`
          : `fragment F${i} on Customer { id orders { customer { ...F${i + 1} } } ...F${i + 1} }`,
      ).join(' ');

    test('a chain of 200 doubly spread fragments is measured (one visit per fragment) and refused', () => {
      const errors = limitErrors(parse(chained(200)), LIMITS);
      assert.equal(errors.length, 1);
      assert.match(errors[0]!.message, /nested 401 levels deep; at most 12/);
    });

    test('the standard introspection nesting passes; one more list is refused', () => {
      const ok = '{ __schema { types { fields { args { type { ofType { ofType { name } } } } } } } }';
      assert.deepEqual(limitErrors(parse(ok), LIMITS), []);
      const deeper = '{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }';
      assert.match(limitErrors(parse(deeper), LIMITS)[0]!.message, /Introspection may nest/);
    });
  });

  describe('limit settings', () => {
    test('defaults, and every bad value listed', () => {
      const config = loadConfig({});
      assert.deepEqual(config.graphql, {
        maxDepth: 12,
        maxAliases: 15,
        maxDirectives: 50,
        maxTokens: 1000,
        maxCost: 10_000,
        maxSubscriptionCost: 200,
        maxMutations: 10,
        apq: { maxBytes: 8192, maxEntries: 2000 },
      });
      try {
        loadConfig({
          MAX_QUERY_DEPTH: '0',
          MAX_TOKENS: 'many',
          MAX_SUBSCRIPTION_COST: '0',
          PERSISTED_DOCUMENTS: '/nonexistent/manifest.json',
        });
        assert.fail('expected a ConfigError');
      } catch (error) {
        assert.ok(error instanceof ConfigError);
        assert.deepEqual(
          error.problems.map((p) => p.split(':')[0]),
          ['MAX_QUERY_DEPTH', 'MAX_TOKENS', 'MAX_SUBSCRIPTION_COST', 'PERSISTED_DOCUMENTS'],
        );
      }
    });

    test('production needs DATABASE_URL unless an open database is handed in', () => {
      const env = { NODE_ENV: 'production', OIDC_ISSUER: 'https://idp.example' };
      assert.throws(() => loadConfig(env), /DATABASE_URL: is required in production/);
      assert.equal(loadConfig(env, { databaseHandedIn: true }).isProduction, true);
    });
  });
});

// ─── was __tests__/unit/jit-differential.test.ts ───
describe('jit-differential', () => {
  /**
   * graphql-js and the graphql-jit executor must give the same answer to the same operation: data, null
   * propagation, error messages, paths and locations, and the same masking once formatted as HTTP responses
   * are (production policy: unexpected errors become INTERNAL_SERVER_ERROR, domain errors keep their code).
   */
  const typeDefs = /* GraphQL */ `
    scalar DateTime
    enum Colour {
      RED
      GREEN
    }
    input Filter {
      colour: Colour!
      min: Int = 0
    }
    type Item {
      id: ID!
      name: String
      mustHave: String!
      colour: Colour!
      at: DateTime!
      child: Item
      strictChild: Item!
      domainFailure: String
      unexpectedFailure: String
      asyncUnexpected: String!
      tags: [String!]
      looseTags: [String]
    }
    type Query {
      item(id: ID!): Item
      strictItem: Item!
      items(filter: Filter, first: Int = 2): [Item!]!
      looseItems: [Item]!
      echo(at: DateTime!, colour: Colour, n: Int!): String!
      throwsDomain: String
      throwsUnexpected: String!
    }
    type Mutation {
      touch(id: ID!): Item
      fail: Item!
    }
  `;

  interface Row {
    id: string;
    at: string;
  }
  const rows = (n: number): Row[] =>
    Array.from({ length: n }, (_, i) => ({ id: `i${i}`, at: `2026-11-2${i % 10}T09:30:00.12${i % 10}Z` }));

  const resolvers = {
    DateTime,
    Query: {
      item: (_: unknown, { id }: { id: string }) => (id === 'none' ? null : { id, at: '2026-11-22T09:30:00.000Z' }),
      strictItem: () => null,
      items: (_: unknown, args: { filter?: { colour: string; min: number }; first: number }) =>
        Promise.resolve(rows(args.first).map((r) => ({ ...r, filterColour: args.filter?.colour }))),
      looseItems: () => [{ id: 'a', at: '2026-11-22T09:30:00Z' }, null, { id: 'c', at: new Date(0) }],
      echo: (_: unknown, args: { at: Date; colour?: string; n: number }) =>
        `${args.at.toISOString()} ${args.colour ?? '-'} ${args.n}`,
      throwsDomain: () => {
        throw new DomainError('FORBIDDEN', 'You may not.');
      },
      throwsUnexpected: async () => {
        throw new Error('connection string postgres://secret leaked');
      },
    },
    Mutation: {
      touch: (_: unknown, { id }: { id: string }) => ({ id, at: '2026-11-22T09:30:00.000Z' }),
      fail: () => Promise.reject(new DomainError('NOT_FOUND', 'Order was not found.')),
    },
    Item: {
      name: (item: Row) => (item.id.endsWith('1') ? null : `Item ${item.id}`),
      mustHave: (item: Row) => (item.id === 'i1' ? null : 'here'),
      colour: (item: Row & { filterColour?: string }) => item.filterColour ?? 'RED',
      child: (item: Row) => (item.id.length > 3 ? null : { id: `${item.id}c`, at: item.at }),
      strictChild: (item: Row) => (item.id === 'i0' ? null : Promise.resolve({ id: `${item.id}s`, at: item.at })),
      domainFailure: () => Promise.reject(new DomainError('PRECONDITION_FAILED', 'It changed.')),
      unexpectedFailure: () => {
        throw new TypeError("Cannot read properties of undefined (reading 'x')");
      },
      asyncUnexpected: async () => {
        throw new Error('boom');
      },
      tags: (item: Row) => (item.id === 'i1' ? ['a', null, 'c'] : ['a', 'b']),
      looseTags: () => ['a', null],
    },
  };

  const schema: GraphQLSchema = makeExecutableSchema({ typeDefs, resolvers: resolvers as never });
  const jit = createJitExecutor(schema);
  const policy = { hideSuggestions: true };

  async function both(query: string, variables?: Record<string, unknown>, operationName?: string) {
    const document = parse(query);
    const reference = (await execute({
      schema,
      document,
      variableValues: variables,
      operationName,
      contextValue: {},
    })) as ExecutionResult;
    const compiled = await jit.execute(`h:${query}`, document, operationName, variables, {});
    const format = (r: ExecutionResult) => formatResult(r, undefined, () => {}, policy);
    return { reference, compiled, formatted: [format(reference), format(compiled)] as const };
  }

  const plain = (value: unknown) => (value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as unknown));

  const cases: [string, string, Record<string, unknown>?, string?][] = [
    ['scalars, enums, a custom scalar and nested objects', '{ item(id: "i0") { id name colour at child { id } } }'],
    ['a nullable root returning null', '{ item(id: "none") { id } }'],
    ['a non-null root returning null nulls all data', '{ strictItem { id } }'],
    ['null propagation from a non-null field to its nullable parent', '{ item(id: "i1") { id mustHave } }'],
    [
      'null propagation inside a non-null list to the nullable root',
      '{ items(first: 3) { id mustHave strictChild { id } } }',
    ],
    ['null propagation through a non-null child object', '{ items(first: 1) { id strictChild { id } } }'],
    ['a null inside a list of non-null strings', '{ items(first: 2) { tags } }'],
    ['nulls allowed in a loose list', '{ looseItems { id at } item(id: "x") { looseTags } }'],
    ['a domain error keeps its code', '{ throwsDomain item(id: "i0") { domainFailure } }'],
    ['unexpected errors are masked, sync and async', '{ item(id: "i0") { unexpectedFailure } }'],
    ['an unexpected error on a non-null root field', '{ throwsUnexpected }'],
    ['an async unexpected error nulls its non-null parent', '{ items(first: 2) { id asyncUnexpected } }'],
    [
      'aliases, fragments and __typename',
      '{ a: item(id: "i0") { ...F } b: item(id: "i1") { ...F } } fragment F on Item { __typename id n: name }',
    ],
    [
      '@skip and @include with variables',
      'query($s: Boolean!) { item(id: "i0") { id name @skip(if: $s) colour @include(if: $s) } }',
      { s: true },
    ],
    [
      'input objects with enums and defaults',
      'query($f: Filter) { items(filter: $f) { id colour } }',
      { f: { colour: 'GREEN' } },
    ],
    [
      'variables coerced: custom scalar, enum, int',
      'query($at: DateTime!, $c: Colour, $n: Int!) { echo(at: $at, colour: $c, n: $n) }',
      { at: '2026-11-22T09:30:00Z', c: 'GREEN', n: 3 },
    ],
    ['a bad custom scalar variable', 'query($at: DateTime!) { echo(at: $at, n: 1) }', { at: 'yesterday' }],
    ['a bad enum variable', 'query($c: Colour) { echo(at: "2026-11-22T09:30:00Z", colour: $c, n: 1) }', { c: 'BLUE' }],
    ['a missing required variable', 'query($n: Int!) { echo(at: "2026-11-22T09:30:00Z", n: $n) }', {}],
    ['an int variable out of range', 'query($n: Int!) { echo(at: "2026-11-22T09:30:00Z", n: $n) }', { n: 2 ** 40 }],
    [
      'a bad input object variable',
      'query($f: Filter) { items(filter: $f) { id } }',
      { f: { colour: 'RED', extra: 1 } },
    ],
    ['a mutation', 'mutation { touch(id: "m1") { id at } }'],
    ['a failing non-null mutation field', 'mutation { fail { id } }'],
    ['a named operation among several', 'query A { item(id: "i0") { id } } query B { strictItem { id } }', {}, 'A'],
  ];

  describe('graphql-jit gives the answers graphql-js gives', () => {
    test.each(cases)('%s', async (...row) => {
      const [, query, variables, operationName] = row;
      const { reference, compiled, formatted } = await both(query, variables, operationName);
      // Raw results: the same data and the same errors (message, path, locations), in the same order.
      assert.deepEqual(plain(compiled.data), plain(reference.data));
      assert.deepEqual(
        compiled.errors?.map((e) => plain(e.toJSON())),
        reference.errors?.map((e) => plain(e.toJSON())),
      );
      // Apollo reads `extensions` (and a thrown error's own extensions ride along), so they must be alike too.
      assert.deepEqual(
        compiled.errors?.map((e) => plain(e.extensions)),
        reference.errors?.map((e) => plain(e.extensions)),
      );
      // As sent over HTTP: masked the same way, byte for byte.
      assert.equal(JSON.stringify(formatted[1]), JSON.stringify(formatted[0]));
    });

    test('the cases do exercise errors, masking and null propagation', async () => {
      const masked = await both('{ item(id: "i0") { unexpectedFailure } }');
      assert.deepEqual(plain(masked.formatted[1]), {
        data: { item: { unexpectedFailure: null } },
        errors: [
          {
            message: 'Internal server error',
            locations: [{ line: 1, column: 20 }],
            path: ['item', 'unexpectedFailure'],
            extensions: { code: 'INTERNAL_SERVER_ERROR' },
          },
        ],
      });
      const propagated = await both('{ items(first: 3) { id mustHave } }');
      assert.equal(propagated.compiled.data, null);
      assert.deepEqual(propagated.compiled.errors?.[0]?.path, ['items', 1, 'mustHave']);
    });

    test('compiled operations are kept per document and operation, bounded in number', async () => {
      const small = createJitExecutor(schema, { maxEntries: 2 });
      for (const id of ['a', 'b', 'c']) {
        const q = `{ item(id: "${id}") { id } }`;
        const result = await small.execute(q, parse(q), undefined, undefined, {});
        assert.deepEqual(plain(result), { data: { item: { id } } });
      }
      assert.equal(small.size, 2);
    });
  });
});
