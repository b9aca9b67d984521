import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { ARGON2_PARAMS, argon2Params, hashPassword } from '../../src/auth/idp/users.js';

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
