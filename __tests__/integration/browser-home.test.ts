import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { WebClient, location, signIn, signInAtIdp, signOut, startLogin } from '../helpers/webClient.js';

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

// One server for the file: every test signs in with a browser (cookie jar) of its own.
let server: TestServer;
let base: string;
beforeAll(async () => {
  server = await startTestServer();
  base = server.running.publicUrl;
});
afterAll(() => server?.close());

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
