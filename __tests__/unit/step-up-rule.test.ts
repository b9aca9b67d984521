import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { outcomeOf, satisfies } from '../../src/auth/idp/signInMethods.js';
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

  test('the embedded IdP asks again only for a level above the session’s: a stronger sign-in satisfies a weaker request', () => {
    assert.equal(satisfies(ACR.mfa, [ACR.password]), true);
    assert.equal(satisfies(ACR.password, [ACR.mfa]), false);
    assert.equal(satisfies(ACR.password, [ACR.mfa, ACR.password]), true);
    assert.equal(satisfies(undefined, [ACR.password]), false);
    // Levels it does not issue cannot be had by asking again.
    assert.equal(satisfies(ACR.password, ['urn:example:acr:gold']), true);
  });
});
