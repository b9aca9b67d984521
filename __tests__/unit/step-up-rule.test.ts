import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { outcomeOf } from '../../src/auth/idp/signInMethods.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { DomainError } from '../../src/domain/errors.js';
import { ACR, meetsStepUp, requireStepUp, type StepUpRule, type User } from '../../src/domain/policy.js';

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
      message: 'Staff changes need a sign-in with a second factor; sign in again with acr_values and max_age as given.',
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
});

describe('STEP_UP_ACR and STEP_UP_MAX_AGE_S', () => {
  const problemsOf = (env: Record<string, string>) => {
    try {
      loadConfig(env);
    } catch (error) {
      assert.ok(error instanceof ConfigError);
      return error.problems;
    }
    assert.fail('expected a ConfigError');
  };
  const ACR_PROBLEM =
    'STEP_UP_ACR: STEP_UP_ACR must be off or up to 10 space-separated acr values of visible ASCII without quotes or backslashes';

  test('the MFA level within 900 seconds by default; off turns the rule off; a list is kept in order', () => {
    assert.deepEqual(loadConfig({}).stepUp, { acrValues: [ACR.mfa], maxAgeSeconds: 900 });
    assert.deepEqual(loadConfig({ STEP_UP_ACR: '' }).stepUp, { acrValues: [ACR.mfa], maxAgeSeconds: 900 });
    assert.equal(loadConfig({ STEP_UP_ACR: 'off' }).stepUp, null);
    assert.deepEqual(loadConfig({ STEP_UP_ACR: ' gold  silver ', STEP_UP_MAX_AGE_S: '60' }).stepUp, {
      acrValues: ['gold', 'silver'],
      maxAgeSeconds: 60,
    });
  });

  test('at most 10 values of visible ASCII without quotes or backslashes; max age 1 to 86400 seconds', () => {
    const ten = Array.from({ length: 10 }, (_, i) => `level${i}`).join(' ');
    assert.equal(loadConfig({ STEP_UP_ACR: ten }).stepUp?.acrValues.length, 10);
    assert.deepEqual(problemsOf({ STEP_UP_ACR: `${ten} level10` }), [ACR_PROBLEM]);
    assert.deepEqual(problemsOf({ STEP_UP_ACR: 'say"cheese' }), [ACR_PROBLEM]);
    assert.deepEqual(problemsOf({ STEP_UP_ACR: 'back\\slash' }), [ACR_PROBLEM]);
    assert.deepEqual(problemsOf({ STEP_UP_ACR: 'é' }), [ACR_PROBLEM]);
    assert.equal(loadConfig({ STEP_UP_MAX_AGE_S: '1' }).stepUp?.maxAgeSeconds, 1);
    assert.equal(loadConfig({ STEP_UP_MAX_AGE_S: '86400' }).stepUp?.maxAgeSeconds, 86400);
    assert.equal(problemsOf({ STEP_UP_MAX_AGE_S: '0' }).length, 1);
    assert.equal(problemsOf({ STEP_UP_MAX_AGE_S: '86401' }).length, 1);
    assert.equal(problemsOf({ STEP_UP_MAX_AGE_S: '1.5' }).length, 1);
  });
});
