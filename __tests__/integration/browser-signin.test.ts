import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import path from 'node:path';
import { decodeJwt } from 'jose';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { DEMO_TOTP_SECRETS } from '../../src/auth/idp/demoTotp.js';
import { launchChromium } from '../helpers/browser.js';
import { enrolmentCode, totpCode } from '../helpers/secondFactor.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { artifactDir } from '../helpers/testRun.js';

const QUERY = '{ recentOrders(first: 100) { customer { name } } }';

interface GraphqlResult {
  status: number;
  body: {
    data?: { recentOrders: { customer: { name: string } }[] } | null;
    errors?: { extensions: { code: string } }[];
  };
}

/** Runs the query from the page itself: same-origin fetch, so the browser attaches its cookie and Origin header. */
function graphqlFromPage(page: Page): Promise<GraphqlResult> {
  return page.evaluate(async (query) => {
    const res = await fetch('/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query }),
    });
    return { status: res.status, body: (await res.json()) as GraphqlResult['body'] };
  }, QUERY);
}

/** How the page's session says the person signed in (/auth/session, from the session's ID token). */
async function sessionOf(page: Page) {
  const session = await page.evaluate(async () => (await fetch('/auth/session')).json() as Promise<unknown>);
  return session as { sub: string; acr: string | null; amr: string[] | null };
}

describe('browser sign-in in headless Chromium', () => {
  let server: TestServer;
  let browser: Browser;
  let base: string;
  let screenshots: string;

  beforeAll(async () => {
    screenshots = artifactDir('browser-signin');
    server = await startTestServer();
    // The browser must use the public URL: the session and login cookies belong to its host.
    base = server.running.publicUrl;
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  test('alice starts on 127.0.0.1, signs in on the IdP form, lands on the home page, and signs out of the app and the IdP without a prompt', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    // Every page the IdP's end-session endpoint shows, to prove no question was asked.
    const endSessionPages: string[] = [];
    page.on('response', (res) => {
      if (new URL(res.url()).pathname === '/idp/session/end') endSessionPages.push(res.url());
    });
    // The pages' Content-Security-Policy allows their own inline style by hash: any violation is a defect.
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    const styled = () => page.evaluate('getComputedStyle(document.body).backgroundColor');

    // The default bind address is not PUBLIC_URL's host: /auth/login moves there before anything else.
    const direct = new URL(server.url);
    assert.equal(direct.hostname, '127.0.0.1');
    assert.notEqual(direct.host, new URL(base).host);
    await page.goto(`${server.url}/auth/login?returnTo=/`);
    assert.equal(new URL(page.url()).origin, base);
    assert.match(new URL(page.url()).pathname, /^\/idp\/interaction\/[\w-]+$/);
    await assert.doesNotReject(page.getByRole('heading', { name: 'Sign in' }).waitFor());
    assert.equal(await styled(), 'rgb(244, 244, 245)', 'the sign-in page has its style');
    await page.screenshot({ path: path.join(screenshots, '1-signin.png'), fullPage: true });

    await page.getByLabel('Username').fill('alice');
    await page.getByLabel('Password').fill('alice');
    await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);
    assert.equal(await page.getByTestId('user').innerText(), 'Alice Adams (alice)');
    assert.equal(await page.getByTestId('role').innerText(), 'customer');
    assert.equal(await styled(), 'rgb(244, 244, 245)', 'the home page has its style');
    assert.equal(await page.getByTestId('scopes').innerText(), 'orders:read orders:write');
    assert.equal(await page.getByRole('link', { name: 'Apollo Sandbox' }).getAttribute('href'), '/graphql');
    assert.equal(await page.getByRole('link', { name: 'GraphiQL' }).getAttribute('href'), '/graphiql');
    await page.screenshot({ path: path.join(screenshots, '2-home-signed-in.png'), fullPage: true });

    const [cookie, ...others] = (await context.cookies(base)).filter((c) => c.name === 'orders_session');
    assert.ok(cookie);
    assert.equal(others.length, 0);
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Lax');
    assert.equal(cookie.path, '/');
    assert.equal(cookie.secure, false, 'PUBLIC_URL is plain http in this test');
    assert.doesNotMatch(String(await page.evaluate('document.cookie')), /orders_session/, 'scripts cannot read it');

    const signedIn = await graphqlFromPage(page);
    assert.equal(signedIn.status, 200);
    const names = new Set(signedIn.body.data!.recentOrders.map((o) => o.customer.name));
    assert.deepEqual([...names], ['Alice Adams']);

    // The home page's button: POST /auth/logout with the session's CSRF token → the IdP's end-session endpoint with
    // id_token_hint → back home, signed out, without the IdP asking "Sign out?".
    await page.getByRole('button', { name: 'Sign out' }).click();
    await assert.doesNotReject(page.getByRole('link', { name: 'Sign in' }).waitFor());
    assert.equal(page.url(), `${base}/`);
    await page.screenshot({ path: path.join(screenshots, '3-home-signed-out.png'), fullPage: true });
    assert.equal(endSessionPages.length, 1, 'the logout went through the IdP');
    assert.equal(new URL(endSessionPages[0]!).searchParams.get('post_logout_redirect_uri'), `${base}/`);
    assert.match(new URL(endSessionPages[0]!).searchParams.get('id_token_hint') ?? '', /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.equal(await page.getByText('No, stay signed in').count(), 0);
    assert.deepEqual(
      (await context.cookies(base)).filter((c) => c.name === 'orders_session'),
      [],
      'the browser dropped the cookie',
    );

    const anonymous = await graphqlFromPage(page);
    assert.equal(anonymous.body.data, null);
    assert.equal(anonymous.body.errors?.[0]?.extensions.code, 'UNAUTHENTICATED');

    // A copy of the old cookie (kept by an attacker, or by a second tab) is refused: the session ended server-side.
    await context.addCookies([{ ...cookie }]);
    const replayed = await graphqlFromPage(page);
    assert.equal(replayed.status, 401);
    assert.equal(replayed.body.data, undefined);
    assert.equal(replayed.body.errors?.[0]?.extensions.code, 'UNAUTHENTICATED');
    await context.clearCookies({ name: 'orders_session' });

    // The IdP's session ended as well: signing in again asks for the password.
    await page.getByRole('link', { name: 'Sign in' }).click();
    await assert.doesNotReject(page.getByLabel('Password').waitFor());
    assert.match(new URL(page.url()).pathname, /^\/idp\/interaction\/[\w-]+$/);
    await page.screenshot({ path: path.join(screenshots, '4-signin-again.png'), fullPage: true });
    assert.deepEqual(violations, []);
    await context.close();
  });

  /** The claims of the ID token the app keeps for the newest session of `sub` (sent as id_token_hint at sign-out). */
  async function idTokenOf(sub: string) {
    const [row] = await server.running.app.db.query<{ id_token: string }>(
      'select id_token from auth_sessions where subject = $1 and revoked_at is null order by created_at desc limit 1',
      [sub],
    );
    return decodeJwt(row!.id_token);
  }

  /** Every Content-Security-Policy complaint of the page's console, to be none. */
  function cspViolations(page: Page): string[] {
    const seen: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) seen.push(message.text());
    });
    return seen;
  }

  async function signInWithPassword(page: Page, user: string) {
    await page.goto(`${base}/auth/login`);
    await page.getByLabel('Username').fill(user);
    await page.getByLabel('Password').fill(user);
    await Promise.all([
      page.waitForURL(`${base}/`),
      page.getByRole('button', { name: 'Sign in', exact: true }).click(),
    ]);
  }

  test('carol signs in with her password, is offered the second factor on the home page, and verifies with her TOTP code', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const violations = cspViolations(page);
    await signInWithPassword(page, 'carol');
    assert.equal(await page.getByTestId('role').innerText(), 'staff');
    assert.equal(await page.getByTestId('level').innerText(), 'password (urn:orders:acr:pwd · pwd)');
    assert.match(
      await page.getByTestId('step-up').innerText(),
      /needs a sign-in with a second factor within the last 15 minutes/,
    );
    await page.screenshot({ path: path.join(screenshots, '5-carol-password.png'), fullPage: true });

    await page.getByRole('link', { name: 'Verify with a second factor' }).click();
    await assert.doesNotReject(page.getByRole('heading', { name: 'Verify it is you' }).waitFor());
    assert.equal(await page.getByLabel('Password').count(), 0, 'a recent session is not asked for its password again');
    await page.screenshot({ path: path.join(screenshots, '6-carol-totp.png'), fullPage: true });
    await page.getByLabel('Code from your authenticator app').fill(await totpCode(DEMO_TOTP_SECRETS.carol!));
    await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Verify' }).click()]);

    assert.equal(await page.getByTestId('level').innerText(), 'second factor (urn:orders:acr:mfa · pwd otp mfa)');
    assert.equal(await page.getByTestId('step-up').count(), 0);
    const session = await sessionOf(page);
    assert.equal(session.acr, 'urn:orders:acr:mfa');
    assert.deepEqual(session.amr, ['pwd', 'otp', 'mfa']);
    const idToken = await idTokenOf('carol');
    assert.equal(idToken.acr, 'urn:orders:acr:mfa');
    assert.deepEqual(idToken.amr, ['pwd', 'otp', 'mfa']);
    await page.screenshot({ path: path.join(screenshots, '7-carol-second-factor.png'), fullPage: true });
    assert.deepEqual(violations, []);
    await context.close();
  });

  test('alice registers a passkey on the account page with the enrolment code her administrator issued, and signs in with it alone (CDP virtual authenticator)', async () => {
    const context: BrowserContext = await browser.newContext();
    const page = await context.newPage();
    const violations = cspViolations(page);
    const cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });

    await signInWithPassword(page, 'alice');
    await page.goto(`${base}/idp/account`);
    assert.equal(
      await page.getByTestId('passkey-count').innerText(),
      'None yet. A passkey signs you in by itself, or as the second factor after your password.',
    );
    // Her first factor is bound with the code issued to her (out of band: here, by the test as her administrator).
    await page
      .locator('form:has([data-webauthn="register"])')
      .getByLabel('Enrolment code from your administrator')
      .fill(await enrolmentCode(base, 'alice'));
    await Promise.all([page.waitForLoadState('load'), page.getByRole('button', { name: 'Add a passkey' }).click()]);
    await assert.doesNotReject(page.getByTestId('message').waitFor());
    assert.equal(await page.getByTestId('message').innerText(), 'The passkey is registered.');
    assert.match(await page.getByTestId('passkey-count').innerText(), /^1 registered\./);
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    assert.equal(credentials.length, 1);
    assert.equal(credentials[0]!.isResidentCredential, true);
    await page.screenshot({ path: path.join(screenshots, '8-alice-passkey-registered.png'), fullPage: true });

    // Signed out of the app and the IdP, she signs in again with the passkey alone: no username, no password.
    await page.goto(`${base}/`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('link', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Use a passkey' }).click();
    await assert.doesNotReject(page.getByRole('heading', { name: 'Sign in with a passkey' }).waitFor());
    await page.screenshot({ path: path.join(screenshots, '9-signin-with-passkey.png'), fullPage: true });
    await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Use a passkey' }).click()]);
    assert.equal(await page.getByTestId('user').innerText(), 'Alice Adams (alice)');
    const session = await sessionOf(page);
    assert.equal(session.acr, 'urn:orders:acr:mfa');
    assert.deepEqual(session.amr, ['hwk', 'user', 'mfa']);
    const idToken = await idTokenOf('alice');
    assert.equal(idToken.acr, 'urn:orders:acr:mfa');
    assert.deepEqual(idToken.amr, ['hwk', 'user', 'mfa']);
    const after = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    assert.ok(after.credentials[0]!.signCount > credentials[0]!.signCount, 'the counter moved on');
    await page.screenshot({ path: path.join(screenshots, '10-alice-signed-in-with-passkey.png'), fullPage: true });
    assert.deepEqual(violations, []);
    await context.close();
  });
});
