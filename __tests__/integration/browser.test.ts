// The tests that drive a browser, in one Jest file: a file loads its modules into a fresh context and costs about 1.5 s
// of CPU before its first test (docs/testing.md#how-long-it-takes). Each top-level describe block below was a test file
// of its own, named after it (the comment above it gives the old file name), with its tests unchanged; their default
// servers are one (sharedServer below), and GraphiQL's production server is started as before.
import assert from 'node:assert/strict';
import path from 'node:path';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { decodeJwt } from 'jose';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import request from 'supertest';
import { DEMO_TOTP_SECRETS } from '../../src/auth/idp/demoTotp.js';
import { launchChromium } from '../helpers/browser.js';
import { enrolmentCode, totpCode } from '../helpers/secondFactor.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sharedTestServer } from '../helpers/sharedServer.js';
import { artifactDir } from '../helpers/testRun.js';
import { location, signIn, signInAtIdp, signOut, startLogin, WebClient } from '../helpers/webClient.js';

/**
 * The default server, for the blocks below (see the helper): each signs in with a browser (cookie jar) of its own and
 * reads its own session and orders. alice, bob and carol are everyone's, and one test alone changes them: alice's
 * first passkey (browser-signin), which the others neither look for nor need, since a password sign-in that asks for
 * no second factor is not asked for one. Replicated: GraphiQL's production server runs over its database.
 */
const sharedServer = sharedTestServer({ replicated: true });

// ─── was __tests__/integration/browser-home.test.ts ───
describe('browser-home', () => {
  const SESSION = 'orders_session';
  const QUESTION = 'No, stay signed in';

  async function signedIn(server: TestServer, user: string): Promise<WebClient> {
    const browser = new WebClient();
    const { response } = await signIn(browser, server.running.publicUrl, user);
    assert.equal(response.status, 303);
    return browser;
  }

  async function csrfTokenOf(browser: WebClient, base: string): Promise<string> {
    const me = await browser.get(`${base}/auth/session`);
    assert.equal(me.status, 200);
    return ((await me.json()) as { csrfToken: string }).csrfToken;
  }

  function hiddenCsrf(html: string): string | undefined {
    return /<input type="hidden" name="csrf" value="([\w-]+)">/.exec(html)?.[1];
  }

  // Every test signs in with a browser (cookie jar) of its own.
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await sharedServer();
    base = server.running.publicUrl;
  });

  describe('the home page and signing out', () => {
    test('API clients get the entry points as JSON; a browser signed out gets a page offering to sign in', async () => {
      for (const accept of ['application/json', '*/*', 'application/json, text/html']) {
        const res = await server.http.get('/').set('accept', accept);
        assert.equal(res.status, 200, accept);
        assert.equal(res.get('content-type'), 'application/json; charset=utf-8', accept);
        assert.equal(res.body.graphql, '/graphql');
      }
      const res = await server.http.get('/').set('accept', 'text/html,application/xhtml+xml,*/*;q=0.8');
      assert.equal(res.status, 200);
      assert.equal(res.get('content-type'), 'text/html; charset=utf-8');
      assert.equal(res.get('cache-control'), 'no-store');
      assert.match(res.get('vary') ?? '', /\bAccept\b/);
      assert.match(res.text, /<p>You are not signed in\.<\/p>/);
      assert.match(res.text, /<a href="\/auth\/login">Sign in<\/a>/);
      assert.doesNotMatch(res.text, /<script/);
      assert.doesNotMatch(res.text, /action="\/auth\/logout"/);
    });

    test("signed in, the page names the user, role and scopes, and its sign-out form carries the session's CSRF token", async () => {
      const alice = await signedIn(server, 'alice');
      const page = await alice.get(`${base}/`, { accept: 'text/html' });
      assert.equal(page.status, 200);
      const html = await page.text();
      assert.match(
        html,
        /Signed in as <strong data-testid="user">Alice Adams <small>\(<code>alice<\/code>\)<\/small><\/strong>/,
      );
      assert.match(html, /<dd data-testid="role">customer<\/dd>/);
      assert.match(html, /<dd data-testid="scopes"><code>orders:read<\/code> <code>orders:write<\/code><\/dd>/);
      assert.match(html, /<a href="\/graphql">Apollo Sandbox<\/a>/);
      assert.match(html, /<a href="\/graphiql">GraphiQL<\/a>/);
      assert.match(html, /<form method="post" action="\/auth\/logout">/);
      assert.equal(hiddenCsrf(html), await csrfTokenOf(alice, base));
      assert.doesNotMatch(html, /<script/);

      const carol = await signedIn(server, 'carol');
      const staff = await (await carol.get(`${base}/`, { accept: 'text/html' })).text();
      assert.match(staff, /<dd data-testid="role">staff<\/dd>/);
      assert.notEqual(hiddenCsrf(staff), hiddenCsrf(html), 'one token per session');
    });

    test('GET /auth/logout is 405 with Allow: POST and signs nobody out', async () => {
      const alice = await signedIn(server, 'alice');
      const res = await alice.get(`${base}/auth/logout`);
      assert.equal(res.status, 405);
      assert.equal(res.headers.get('allow'), 'POST');
      assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
      assert.deepEqual(await res.json(), {
        type: '/problems/method-not-allowed',
        title: 'Method not allowed',
        status: 405,
        detail: 'Sign out with POST /auth/logout (the home page has a button).',
        instance: '/auth/logout',
        code: 'METHOD_NOT_ALLOWED',
      });
      const del = await request(base).delete('/auth/logout');
      assert.equal(del.status, 405);
      assert.equal(del.get('allow'), 'POST');
      assert.equal((await alice.get(`${base}/auth/session`)).status, 200);
    });

    test('any method but GET or HEAD on /auth/login, /auth/callback and /auth/session is 405 with Allow: GET, HEAD', async () => {
      for (const path of ['/auth/login', '/auth/callback', '/auth/session']) {
        for (const method of ['put', 'delete', 'post', 'patch'] as const) {
          const res = await request(base)[method](path);
          assert.equal(res.status, 405, `${method} ${path}`);
          assert.equal(res.get('allow'), 'GET, HEAD');
          assert.equal(res.get('content-type'), 'application/problem+json; charset=utf-8');
          assert.deepEqual(res.body, {
            type: '/problems/method-not-allowed',
            title: 'Method not allowed',
            status: 405,
            detail: `${method.toUpperCase()} is not supported here; use GET.`,
            instance: path,
            code: 'METHOD_NOT_ALLOWED',
          });
        }
      }
      // HEAD is GET without the body.
      assert.equal((await request(base).head('/auth/session')).status, 401);
    });

    test('a sign-out without the session’s CSRF token, or with another session’s, is refused and the session lives on', async () => {
      const alice = await signedIn(server, 'alice');
      const bob = await signedIn(server, 'bob');
      const sameOrigin = { origin: new URL(base).origin };
      const forms: Record<string, string>[] = [
        {},
        { csrf: '' },
        { csrf: await csrfTokenOf(bob, base) },
        { csrf: 'x'.repeat(43) },
      ];
      for (const form of forms) {
        const res = await alice.post(`${base}/auth/logout`, form, sameOrigin);
        assert.equal(res.status, 403, JSON.stringify(form));
        assert.match(await res.text(), /did not come from a page of this site/);
        assert.deepEqual(res.headers.getSetCookie(), []);
      }
      // Without an Origin header (an older browser, a privacy extension) the token alone decides.
      assert.equal((await alice.post(`${base}/auth/logout`)).status, 403);
      assert.equal((await alice.get(`${base}/auth/session`)).status, 200);

      const ok = await alice.post(`${base}/auth/logout`, { csrf: await csrfTokenOf(alice, base) }, sameOrigin);
      assert.equal(ok.status, 303);
      assert.equal((await request(base).get('/auth/session').set('cookie', `${SESSION}=x`)).status, 401);
      assert.equal((await alice.get(`${base}/auth/session`)).status, 401);
    });

    test('/auth/login on another host name first moves to PUBLIC_URL, keeping only a checked returnTo', async () => {
      assert.notEqual(new URL(server.url).host, new URL(base).host);
      const bare = await request(server.url).get('/auth/login');
      assert.equal(bare.status, 303);
      assert.equal(bare.get('location'), `${base}/auth/login`);
      assert.equal(bare.get('set-cookie'), undefined, 'no login cookie on a host the callback never reaches');

      const kept = await request(server.url).get('/auth/login').query({ returnTo: '/a/./b/../c?q=1&r=%2F' });
      assert.equal(kept.status, 303);
      const to = new URL(kept.get('location')!);
      assert.equal(`${to.origin}${to.pathname}`, `${base}/auth/login`);
      assert.equal(to.searchParams.get('returnTo'), '/a/c?q=1&r=%2F');

      const hostile = await request(server.url).get('/auth/login').query({ returnTo: '//evil.example' });
      assert.equal(hostile.status, 400);

      // On PUBLIC_URL's host it goes straight to the issuer.
      assert.equal((await request(base).get('/auth/login')).status, 302);
    });
  });

  describe("the IdP's end-session prompt", () => {
    test("is skipped only for an ID token of the browser's own IdP session, and then the IdP session is over", async () => {
      const alice = await signedIn(server, 'alice');
      const toIdp = location(await signOut(alice, base));
      assert.equal(`${toIdp.origin}${toIdp.pathname}`, `${server.running.app.issuer}/session/end`);
      assert.ok(toIdp.searchParams.get('id_token_hint'));
      const bobsHint = location(await signOut(await signedIn(server, 'bob'), base));

      // Without a hint, or with someone else's, the IdP asks (RP-Initiated Logout §2).
      const bare = await alice.get(`${server.running.app.issuer}/session/end`);
      assert.equal(bare.status, 200);
      assert.match(await bare.text(), new RegExp(QUESTION));
      const foreign = await alice.get(bobsHint);
      assert.equal(foreign.status, 200);
      assert.match(await foreign.text(), new RegExp(QUESTION));

      // With alice's own: a page that submits the IdP's form by itself.
      const own = await alice.get(toIdp);
      assert.equal(own.status, 200);
      const html = await own.text();
      assert.doesNotMatch(html, new RegExp(QUESTION));
      assert.match(html, /<h1>Signing out…<\/h1>/);
      assert.match(html, /<button type="submit" id="sign-out" form="op\.logoutForm" name="logout" value="yes">/);
      assert.match(html, /<script>document\.getElementById\('sign-out'\)\.click\(\);<\/script>/);
      const form =
        /<form id="op\.logoutForm" method="post" action="([^"]+)"><input type="hidden" name="xsrf" value="([^"]+)"\/>/.exec(
          html,
        );
      assert.ok(form, html);
      const done = await alice.post(new URL(form[1]!, base), { xsrf: form[2]!, logout: 'yes' });
      assert.equal(done.status, 303);
      assert.equal(location(done).href, `${base}/`);

      // The IdP forgot alice: a new sign-in shows its password form again instead of returning at once.
      const authorization = await startLogin(alice, base);
      const atIdp = await alice.get(authorization);
      const interaction = location(atIdp);
      assert.match(interaction.pathname, /^\/idp\/interaction\//);
      const prompt = await alice.get(interaction);
      assert.equal(prompt.status, 200);
      assert.match(await prompt.text(), /<input id="password" name="password" type="password"/);
      // …and signing in there works as before.
      assert.equal((await signInAtIdp(alice, authorization, 'alice')).pathname, '/auth/callback');
    });
  });
});

// ─── was __tests__/integration/browser-signin.test.ts ───
describe('browser-signin', () => {
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
      server = await sharedServer();
      // The browser must use the public URL: the session and login cookies belong to its host.
      base = server.running.publicUrl;
      browser = await launchChromium();
    });

    afterAll(() => browser?.close());

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
      assert.equal(
        await page.getByLabel('Password').count(),
        0,
        'a recent session is not asked for its password again',
      );
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
});

// ─── was __tests__/integration/graphiql.test.ts ───
describe('graphiql', () => {
  const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1']);

  /** A browser context with the network closed: requests off this machine are aborted and listed in `outside`. */
  async function offlineContext(browser: Browser) {
    const context = await browser.newContext();
    const outside: string[] = [];
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url());
      if (LOCAL_HOSTS.has(url.hostname)) return route.continue();
      outside.push(url.href);
      return route.abort('internetdisconnected');
    });
    return { context, outside };
  }

  interface OrdersResult {
    data: {
      viewer: { id: string; subject: string };
      recentOrders: { id: string; customer: { name: string } }[];
      products: unknown[];
    };
  }

  describe('GraphiQL at /graphiql', () => {
    let server: TestServer;
    let prod: TestServer;
    beforeAll(async () => {
      server = await sharedServer();
      prod = await startTestServer(
        { NODE_ENV: 'production', OIDC_ISSUER: server.running.app.issuer },
        { sameDatabaseAs: server },
      );
    });
    afterAll(() => prod?.close());

    test('serves the page and its assets from this server, under a policy of their own', async () => {
      const page = await server.http.get('/graphiql').set('accept', 'text/html');
      assert.equal(page.status, 200);
      assert.equal(page.get('content-type'), 'text/html; charset=utf-8');
      const csp = String(page.get('content-security-policy'));
      assert.match(csp, /script-src 'self';/);
      assert.doesNotMatch(csp, /unsafe-eval/);
      const sources = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
      assert.deepEqual(sources, [
        '/graphiql/assets/graphiql.css',
        '/graphiql/assets/page.css',
        '/graphiql/assets/react.js',
        '/graphiql/assets/react-dom.js',
        '/graphiql/assets/graphiql.js',
        '/graphiql/assets/app.js',
      ]);
      for (const source of sources) {
        const asset = await server.http.get(source);
        assert.equal(asset.status, 200, source);
        assert.match(String(asset.get('content-type')), source.endsWith('.css') ? /^text\/css/ : /javascript/, source);
        assert.equal(asset.get('content-security-policy'), csp);
      }
      const unknown = await server.http.get('/graphiql/assets/..%2Fpackage.json');
      assert.equal(unknown.status, 404);
      assert.equal(unknown.get('content-type'), 'application/problem+json; charset=utf-8');
    });

    test('the /graphql landing page keeps Sandbox and links to GraphiQL in its offline fallback', async () => {
      const res = await server.http.get('/graphql').set('accept', 'text/html');
      assert.equal(res.status, 200);
      assert.match(res.text, /embeddable-sandbox\.cdn\.apollographql\.com/);
      assert.match(
        res.text,
        /might be offline\.<\/p>\s*<p>GraphiQL needs no internet: <a href="\/graphiql">\/graphiql<\/a>\.<\/p>/,
      );
    });

    test('production serves neither GraphiQL nor its assets: 404 problem+json, like Sandbox', async () => {
      for (const url of ['/graphiql', '/graphiql/assets/graphiql.js']) {
        const res = await prod.http.get(url).set('accept', 'text/html');
        assert.equal(res.status, 404, url);
        assert.equal(res.get('content-type'), 'application/problem+json; charset=utf-8');
        assert.equal((res.body as { code: string }).code, 'ROUTE_NOT_FOUND');
      }
    });

    describe('in headless Chromium, with the network closed', () => {
      let browser: Browser;
      beforeAll(async () => {
        browser = await launchChromium();
      });
      afterAll(() => browser?.close());

      test('alice signs in, GraphiQL loads the schema by introspection and runs a query returning her orders', async () => {
        const screenshots = artifactDir('graphiql');
        // The browser uses the public URL: the session cookie belongs to its host.
        const base = server.running.publicUrl;
        const { context, outside } = await offlineContext(browser);
        // Every Content-Security-Policy violation on any page, kept where the test can read it (no DOM types here).
        await context.addInitScript(`
        window.cspViolations = [];
        document.addEventListener('securitypolicyviolation', (e) =>
          window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));
      `);
        const page = await context.newPage();

        // Sandbox needs Apollo's CDN: offline, its fallback shows, with the link to GraphiQL.
        await page.goto(`${base}/graphql`);
        await page.getByText('it appears that you might be offline').waitFor();
        assert.ok(outside.some((url) => url.startsWith('https://embeddable-sandbox.cdn.apollographql.com/')));
        assert.equal(await page.getByRole('link', { name: '/graphiql' }).getAttribute('href'), '/graphiql');
        await page.screenshot({ path: path.join(screenshots, 'sandbox-offline.png') });
        outside.length = 0;

        await page.goto(`${base}/auth/login?returnTo=/graphiql`);
        await page.getByLabel('Username').fill('alice');
        await page.getByLabel('Password').fill('alice');
        const introspection = page.waitForResponse(
          (r) => r.url() === `${base}/graphql` && String(r.request().postData()).includes('__schema'),
        );
        await Promise.all([page.waitForURL(`${base}/graphiql`), page.getByRole('button', { name: 'Sign in' }).click()]);
        const schema = await introspection;
        assert.equal(schema.status(), 200);
        const types = ((await schema.json()) as { data: { __schema: { types: { name: string }[] } } }).data.__schema
          .types;
        assert.ok(types.some((t) => t.name === 'Order'));

        // The documentation explorer is built from that introspection.
        await page.getByRole('button', { name: /Documentation Explorer/ }).click();
        await page.getByText('query:').waitFor();
        await page.getByRole('link', { name: 'Query' }).first().waitFor();

        const run = page.waitForResponse(
          (r) => r.url() === `${base}/graphql` && String(r.request().postData()).includes('recentOrders'),
        );
        await page.getByRole('button', { name: /Execute query/ }).click();
        const response = await run;
        assert.equal(response.status(), 200);
        const result = (await response.json()) as OrdersResult;
        assert.equal(result.data.viewer.subject, 'alice');
        assert.ok(result.data.recentOrders.length > 0);
        assert.ok(result.data.recentOrders.every((o) => o.customer.name === 'Alice Adams'));
        // What the response pane shows is that result.
        const pane = page.locator('.graphiql-response');
        await pane.getByText(`"${result.data.recentOrders[0]!.id}"`).waitFor();
        await page.screenshot({ path: path.join(screenshots, 'graphiql-orders.png'), fullPage: true });

        assert.deepEqual(outside, [], 'GraphiQL reached outside this server');
        assert.deepEqual(await page.evaluate<string[]>('window.cspViolations'), []);
        // The listener does hear violations: an inline style element is one.
        await page.evaluate(
          `document.head.append(Object.assign(document.createElement('style'), { textContent: 'b{}' }))`,
        );
        await page.waitForFunction('window.cspViolations.length > 0');
        assert.match((await page.evaluate<string[]>('window.cspViolations'))[0]!, /^style-src/);
        await context.close();
      });

      test('without a session, a token pasted into the headers editor authenticates the query', async () => {
        const base = server.running.publicUrl;
        const token = await server.token('bob');
        const { context, outside } = await offlineContext(browser);
        const page = await context.newPage();
        await page.goto(`${base}/graphiql`);
        await page.getByRole('button', { name: /Execute query/ }).waitFor();
        // Anonymous first: the query is refused for want of credentials.
        const anonymous = page.waitForResponse((r) => String(r.request().postData()).includes('recentOrders'));
        await page.getByRole('button', { name: /Execute query/ }).click();
        const refused = (await (await anonymous).json()) as { errors: { extensions: { code: string } }[] };
        assert.equal(refused.errors[0]!.extensions.code, 'UNAUTHENTICATED');

        await page.getByRole('button', { name: 'Headers' }).click();
        await page.locator('.graphiql-editor-tool .CodeMirror').last().click();
        await page.keyboard.insertText(JSON.stringify({ Authorization: `Bearer ${token}` }));
        const run = page.waitForResponse((r) => String(r.request().postData()).includes('recentOrders'));
        await page.getByRole('button', { name: /Execute query/ }).click();
        const response = await run;
        assert.equal(response.request().headers().authorization, `Bearer ${token}`);
        const result = (await response.json()) as OrdersResult;
        assert.equal(result.data.viewer.subject, 'bob');
        assert.ok(
          result.data.recentOrders.every((o) => o.customer.name === result.data.recentOrders[0]!.customer.name),
        );
        assert.notEqual(result.data.recentOrders[0]?.customer.name, 'Alice Adams');
        assert.deepEqual(outside, []);
        await context.close();
      });
    });
  });
});
