import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startSwitchableIssuer, type SwitchableIssuer } from '../helpers/switchableIssuer.js';
import { WebClient, location, signIn, signInAtIdp, startLogin } from '../helpers/webClient.js';

const SESSION = 'orders_session';

async function sessionCount(server: TestServer): Promise<number> {
  const [row] = await server.running.app.db.query<{ n: number }>('select count(*)::int as n from auth_sessions');
  return Number(row!.n);
}

/** A refused callback: an HTML page with the reason, the login cookie cleared, and no session anywhere. */
async function assertRefused(
  server: TestServer,
  res: Response,
  status: number,
  message: RegExp,
  sessionsBefore: number,
) {
  assert.equal(res.status, status);
  assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  assert.match(await res.text(), message);
  const cookies = res.headers.getSetCookie();
  assert.deepEqual(
    cookies.filter((c) => c.startsWith(`${SESSION}=`)),
    [],
    'no session cookie',
  );
  assert.deepEqual(cookies, ['orders_login=; Path=/auth; HttpOnly; SameSite=Lax; Max-Age=0']);
  assert.equal(await sessionCount(server), sessionsBefore, 'no session row');
}

describe('the sign-in callback refuses bad input (embedded issuer)', () => {
  let server: TestServer;
  let base: string;

  beforeAll(async () => {
    server = await startTestServer();
    base = server.running.publicUrl;
  });
  afterAll(() => server?.close());

  test('refuses a callback without the login cookie of this browser', async () => {
    const before = await sessionCount(server);
    const callback = await signInAtIdp(new WebClient(), await startLogin(new WebClient(), base), 'alice');
    // Delivered to a browser that never started this sign-in (login CSRF): no cookie, no attempt.
    const res = await new WebClient().get(callback);
    await assertRefused(server, res, 400, /This sign-in has expired, was already completed/, before);
  });

  test('refuses a callback with a missing state', async () => {
    const browser = new WebClient();
    const before = await sessionCount(server);
    const callback = await signInAtIdp(browser, await startLogin(browser, base), 'alice');
    callback.searchParams.delete('state');
    await assertRefused(server, await browser.get(callback), 400, /could not be verified/, before);
  });

  test('refuses a callback with a wrong state, and the attempt is spent', async () => {
    const browser = new WebClient();
    const before = await sessionCount(server);
    const callback = await signInAtIdp(browser, await startLogin(browser, base), 'alice');
    const forged = new URL(callback);
    forged.searchParams.set('state', 'x'.repeat(43));
    const login = browser.cookie(base, 'orders_login')!;
    await assertRefused(server, await browser.get(forged), 400, /could not be verified/, before);
    // Even with its login cookie back, the genuine response no longer finds the attempt.
    browser.setCookie(base, 'orders_login', login);
    await assertRefused(server, await browser.get(callback), 400, /Sign-in expired/, before);
  });

  test('refuses a replayed callback (state used once)', async () => {
    const browser = new WebClient();
    const login = await startLogin(browser, base);
    const attemptCookie = browser.cookie(base, 'orders_login')!;
    const callback = await signInAtIdp(browser, login, 'alice');
    const first = await browser.get(callback);
    assert.equal(first.status, 303);
    const before = await sessionCount(server);
    browser.setCookie(base, 'orders_login', attemptCookie);
    await assertRefused(server, await browser.get(callback), 400, /Sign-in expired/, before);
  });

  test('refuses a code used twice', async () => {
    const browser = new WebClient();
    const { callback, response } = await signIn(browser, base, 'alice');
    assert.equal(response.status, 303);
    const before = await sessionCount(server);
    // A second, genuine attempt (own cookie and state) carrying the first attempt's spent code.
    const second = await startLogin(browser, base);
    const replay = new URL(callback);
    replay.searchParams.set('state', second.searchParams.get('state')!);
    await assertRefused(server, await browser.get(replay), 400, /could not be verified/, before);
  });

  test('shows the IdP refusal (error=access_denied) when the person cancels', async () => {
    const browser = new WebClient();
    const before = await sessionCount(server);
    const callback = await signInAtIdp(browser, await startLogin(browser, base), 'alice', { cancel: true });
    assert.equal(callback.searchParams.get('error'), 'access_denied');
    const res = await browser.get(callback);
    await assertRefused(
      server,
      res,
      400,
      /Sign-in was cancelled or refused at the identity provider \(access_denied\)/,
      before,
    );
  });

  test('does not display an error_description from the URL', async () => {
    const browser = new WebClient();
    const login = await startLogin(browser, base);
    const res = await browser.get(
      `${base}/auth/callback?error=access_denied&error_description=Call+0800-SCAM&state=${login.searchParams.get('state')}&iss=${encodeURIComponent(server.running.app.issuer)}`,
    );
    assert.equal(res.status, 400);
    assert.doesNotMatch(await res.text(), /SCAM/);
  });

  for (const returnTo of ['https://evil.example/', '//evil.example', '/\\evil.example', 'evil.example', '/ok\r\nx']) {
    test(`refuses returnTo ${JSON.stringify(returnTo)} (no open redirect)`, async () => {
      const res = await new WebClient().get(`${base}/auth/login?returnTo=${encodeURIComponent(returnTo)}`);
      assert.equal(res.status, 400);
      assert.equal(res.headers.get('location'), null);
      assert.deepEqual(res.headers.getSetCookie(), []);
      assert.match(await res.text(), /returnTo must be a path on this site/);
    });
  }

  test('returns to a relative path on this site after signing in', async () => {
    const { response } = await signIn(new WebClient(), base, 'alice', '/graphql?x=1#frag');
    assert.equal(response.status, 303);
    assert.equal(response.headers.get('location'), '/graphql?x=1#frag');
  });
});

describe('the sign-in callback refuses hostile issuers (external issuer)', () => {
  let issuer: SwitchableIssuer;
  let server: TestServer;
  let base: string;

  beforeAll(async () => {
    issuer = await startSwitchableIssuer();
    server = await startTestServer({
      OIDC_ISSUER: issuer.url,
      OIDC_CLIENT_ID: 'orders-web',
      OIDC_CLIENT_SECRET: 'orders-web-secret',
    });
    base = server.running.publicUrl;
  });
  afterAll(async () => {
    await server?.close();
    await issuer?.close();
  });

  test('signs in through the genuine issuer (control for the cases below)', async () => {
    issuer.setMode('genuine');
    const browser = new WebClient();
    const { response } = await signIn(browser, base, 'alice');
    assert.equal(response.status, 303);
    const result = await browser.graphql(base, '{ viewer { subject } }');
    assert.deepEqual(result.body.data, { viewer: { subject: 'alice' } });
  });

  test('refuses an ID token with a forged signature (a second key pair under the same kid)', async () => {
    issuer.setMode('forged-signature');
    const browser = new WebClient();
    const before = await sessionCount(server);
    const { response } = await signIn(browser, base, 'alice');
    await assertRefused(server, response, 400, /could not be verified/, before);
  });

  test('refuses a response from another issuer (mix-up: its iss in the redirect)', async () => {
    issuer.setMode('other-issuer');
    const browser = new WebClient();
    const before = await sessionCount(server);
    const callback = await signInAtIdp(browser, await startLogin(browser, base), 'alice');
    assert.equal(callback.searchParams.get('iss'), issuer.otherIssuer);
    await assertRefused(server, await browser.get(callback), 400, /could not be verified/, before);
  });

  test('refuses an ID token from another issuer even when the redirect names ours', async () => {
    issuer.setMode('other-issuer');
    const browser = new WebClient();
    const before = await sessionCount(server);
    const callback = await signInAtIdp(browser, await startLogin(browser, base), 'alice');
    callback.searchParams.set('iss', issuer.url);
    await assertRefused(server, await browser.get(callback), 400, /could not be verified/, before);
  });

  test('the login redirect goes to the configured issuer with the web client', async () => {
    const res = await new WebClient().get(`${base}/auth/login`);
    assert.equal(res.status, 302);
    const to = location(res);
    assert.equal(`${to.origin}${to.pathname}`, `${issuer.url}/auth`);
    assert.equal(to.searchParams.get('client_id'), 'orders-web');
  });
});

describe('browser sign-in without a web client', () => {
  test('answers 503 saying browser sign-in is not configured', async () => {
    // Discovery is lazy, so an unreachable issuer does not stop the app from starting.
    const server = await startTestServer({ OIDC_ISSUER: 'http://127.0.0.1:9/idp' });
    try {
      const res = await server.http.get('/auth/login');
      assert.equal(res.status, 503);
      assert.equal(res.get('cache-control'), 'no-store');
      assert.match(res.text, /Browser sign-in is not configured/);
    } finally {
      await server.close();
    }
  });
});
