import { describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { createSigninThrottle, SIGNIN_LIMITS, signinDelayMs } from '../../src/auth/idp/signinThrottle.js';
import { memoryAttemptCounters } from '../../src/store/attemptCounters.js';

const quiet = { warn() {}, info() {} };

function clock(start = 5_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('sign-in throttle (in process)', () => {
  test('the first failures are free, later ones are delayed, then the username locks', async () => {
    const throttle = createSigninThrottle({ namespace: 't', logger: quiet, now: clock().now });
    const verdicts = [];
    for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter + 1; i++) verdicts.push(await throttle.begin('alice', '10.0.0.1'));
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
    for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter; i++) await throttle.begin('dave', `10.3.${i}.1`, 'second-factor');
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
