import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { calculatePKCECodeChallenge } from 'openid-client';
import request from 'supertest';
import { SIGNIN_LIMITS } from '../../src/auth/idp/signinThrottle.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

// Long enough that the attempts right after the tenth failure still meet the lock on a busy machine.
const LOCK_SECONDS = 10;

interface LoginForm {
  readonly origin: string;
  readonly path: string;
  readonly cookie: string;
}

/** An authorization request as a mobile app starts it, up to the sign-in form the IdP redirects to. */
async function openLoginForm(server: TestServer): Promise<LoginForm> {
  const issuer = new URL(server.running.app.issuer);
  const started = await request(issuer.origin)
    .get(`${issuer.pathname}/auth`)
    .query({
      client_id: 'orders-mobile',
      redirect_uri: 'http://127.0.0.1/callback',
      response_type: 'code',
      scope: 'openid orders:read',
      code_challenge: await calculatePKCECodeChallenge('v'.repeat(43)),
      code_challenge_method: 'S256',
    })
    .expect(303);
  const cookies = ([] as string[]).concat(started.headers['set-cookie'] ?? []);
  return {
    origin: issuer.origin,
    path: `${new URL(started.headers['location']!, issuer).pathname}/login`,
    cookie: cookies.map((c) => c.split(';')[0]).join('; '),
  };
}

function submit(form: LoginForm, ip: string, username: string, password: string) {
  return request(form.origin)
    .post(form.path)
    .set('cookie', form.cookie)
    .set('x-forwarded-for', ip)
    .type('form')
    .send({ username, password })
    .redirects(0);
}

/**
 * What a person or script can observe, less what they sent themselves (the name typed, their form's address) and
 * the seconds left of a lock, which depend only on when that name's last counted failure happened.
 */
function observable(res: request.Response, form: LoginForm, username: string) {
  return {
    status: res.status,
    type: res.headers['content-type'],
    cacheControl: res.headers['cache-control'],
    retryAfter: res.headers['retry-after'] === undefined ? 'absent' : 'present',
    page: res.text
      .split(`value="${username}"`)
      .join('value="…"')
      .split(form.path)
      .join('…')
      .replace(/Try again in \d+ (seconds|minutes)/, 'Try again in …'),
  };
}

const alert = (res: request.Response) => /role="alert">([^<]*)</.exec(res.text)?.[1];

describe('sign-in throttling at the embedded IdP', () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ SIGNIN_LOCK_S: String(LOCK_SECONDS), TRUST_PROXY: '1' });
  });

  afterAll(async () => {
    await server.close();
  });

  test('an unknown user and a wrong password get identical answers: slowed down, then locked', async () => {
    const [known, unknown] = await Promise.all([openLoginForm(server), openLoginForm(server)]);
    for (let attempt = 1; attempt <= SIGNIN_LIMITS.user.lockAfter + 1; attempt++) {
      const [wrongPassword, noSuchUser] = await Promise.all([
        submit(known, '198.51.100.1', 'alice', 'not-alice'),
        submit(unknown, '198.51.100.2', 'mallory', 'mallory'),
      ]);
      assert.deepEqual(
        observable(wrongPassword, known, 'alice'),
        observable(noSuchUser, unknown, 'mallory'),
        `attempt ${attempt}`,
      );

      if (attempt <= SIGNIN_LIMITS.user.delayAfter) {
        assert.equal(wrongPassword.status, 401);
        assert.equal(alert(wrongPassword), 'Wrong username or password.');
      } else if (attempt <= SIGNIN_LIMITS.user.lockAfter) {
        assert.equal(wrongPassword.status, 401);
        assert.match(
          alert(wrongPassword)!,
          /^Wrong username or password\. After repeated failures each attempt is slowed/,
        );
      } else {
        assert.equal(wrongPassword.status, 429);
        assert.match(alert(wrongPassword)!, /^Too many failed sign-in attempts\. Try again in \d+ seconds\.$/);
        const retryAfter = Number(wrongPassword.headers['retry-after']);
        assert.ok(retryAfter >= 1 && retryAfter <= LOCK_SECONDS, `Retry-After ${retryAfter}`);
        assert.match(wrongPassword.text, /<form method="post" action="[^"]+\/login">/);
      }
    }

    // Locked means locked: from another address, even the right password is refused until the lock ends.
    const form = await openLoginForm(server);
    const locked = await submit(form, '198.51.100.3', 'alice', 'alice').expect(429);
    assert.match(alert(locked)!, /^Too many failed sign-in attempts/);

    let signedIn: request.Response | undefined;
    while (!signedIn) {
      const res = await submit(form, '198.51.100.3', 'Alice', 'alice');
      if (res.status === 303) signedIn = res;
      else {
        assert.equal(res.status, 429, 'nothing but the lock stands in the way');
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    assert.match(signedIn.headers['location']!, /\/idp\/auth\//);
  });

  test('a success resets the username’s count of failures', async () => {
    const first = await openLoginForm(server);
    for (let i = 0; i < SIGNIN_LIMITS.user.delayAfter - 1; i++) {
      await submit(first, '198.51.100.4', 'bob', 'wrong').expect(401);
    }
    await submit(first, '198.51.100.4', 'bob', 'bob').expect(303);

    const second = await openLoginForm(server);
    for (let i = 0; i < SIGNIN_LIMITS.user.delayAfter; i++) {
      const res = await submit(second, '198.51.100.4', 'bob', 'wrong').expect(401);
      assert.equal(alert(res), 'Wrong username or password.', `failure ${i + 1} after the success is not slowed`);
    }
    const sixth = await submit(second, '198.51.100.4', 'bob', 'wrong').expect(401);
    assert.match(alert(sixth)!, /slowed/);
  });

  test('oversized or empty fields are answered like any wrong password', async () => {
    const form = await openLoginForm(server);
    const res = await submit(form, '198.51.100.5', 'x'.repeat(3000), 'y'.repeat(3000)).expect(401);
    assert.equal(alert(res), 'Wrong username or password.');
    await submit(form, '198.51.100.5', '', '').expect(401);
  });
});
