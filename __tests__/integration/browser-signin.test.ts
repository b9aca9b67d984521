import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { artifactDir } from '../helpers/testRun.js';

// Debian's chromium, never a downloaded browser; .ci/run installs it when missing.
const CHROMIUM = '/usr/bin/chromium';
const NO_CHROMIUM = `Chromium is missing (${CHROMIUM}): install Debian's package with \`apt-get install chromium\`, then run the tests again.`;
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

describe('browser sign-in in headless Chromium', () => {
  let server: TestServer;
  let browser: Browser;
  let base: string;
  let screenshots: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(NO_CHROMIUM);
    screenshots = artifactDir('browser-signin');
    server = await startTestServer();
    // The browser must use the public URL: the session and login cookies belong to its host.
    base = server.running.publicUrl;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  test('alice signs in on the IdP form, sees only her orders over GraphQL, signs out, and the cookie stops working', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();

    await page.goto(`${base}/auth/login?returnTo=/auth/session`);
    assert.match(new URL(page.url()).pathname, /^\/idp\/interaction\/[\w-]+$/);
    await assert.doesNotReject(page.getByRole('heading', { name: 'Sign in' }).waitFor());
    await page.screenshot({ path: path.join(screenshots, 'signin.png'), fullPage: true });

    await page.getByLabel('Username').fill('alice');
    await page.getByLabel('Password').fill('alice');
    await Promise.all([page.waitForURL(`${base}/auth/session`), page.getByRole('button', { name: 'Sign in' }).click()]);
    const session = JSON.parse(await page.locator('body').innerText()) as Record<string, unknown>;
    assert.equal(session.sub, 'alice');
    assert.equal(session.name, 'Alice Adams');
    assert.equal(session.email, 'alice@example.com');
    assert.deepEqual(session.roles, []);

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

    // Sign out the way a page does, with a form post; the IdP then asks to end its own session too.
    await page.evaluate(`{
      const form = document.createElement('form');
      form.method = 'post';
      form.action = '/auth/logout';
      document.body.append(form);
      form.submit();
    }`);
    await page.waitForURL(/\/idp\/session\/end/);
    await page.screenshot({ path: path.join(screenshots, 'signout.png'), fullPage: true });
    await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Yes, sign me out' }).click()]);
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

    // The IdP's session ended as well: signing in again asks for the password.
    await page.goto(`${base}/auth/login`);
    await assert.doesNotReject(page.getByLabel('Password').waitFor());
    await context.close();
  });
});
