// Sign-in, browser sessions, CSRF and bearer tokens, in one Jest file: a file loads its modules into a fresh context
// and costs about 1.5 s of CPU before its first test (docs/testing.md#how-long-it-takes). Each top-level describe block
// below was a test file of its own, named after it (the comment above it gives the old file name), with its tests
// unchanged, starting the servers it starts; none shares a server with another block.
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, jest, test } from '@jest/globals';
import { type CryptoKey, exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import * as oidc from 'openid-client';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sharedTestServer } from '../helpers/sharedServer.js';
import { startSwitchableIssuer, type SwitchableIssuer } from '../helpers/switchableIssuer.js';
import { appProcessArgs, testDataDir } from '../helpers/testRun.js';
import { location, signIn, signInAtIdp, signOut, startLogin, WebClient } from '../helpers/webClient.js';

/** The default server, for the blocks below that own their data (see the helper). */
const sharedServer = sharedTestServer();

// ─── was __tests__/integration/auth-callback.test.ts ───
describe('auth-callback', () => {
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
      server = await sharedServer();
      base = server.running.publicUrl;
    });

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
});

// ─── was __tests__/integration/auth-sessions.test.ts ───
describe('auth-sessions', () => {
  const SESSION = 'orders_session';
  const ORDERS = '{ recentOrders(first: 100) { customer { name } } }';
  const CORS_ORIGIN = 'https://shop.example.com';

  type OrdersData = { recentOrders: { customer: { name: string } }[] };

  function customerNames(data: unknown): string[] {
    return [...new Set((data as OrdersData).recentOrders.map((o) => o.customer.name))].sort();
  }

  async function signedIn(server: TestServer, user: string): Promise<{ browser: WebClient; cookie: string }> {
    const browser = new WebClient();
    const { response } = await signIn(browser, server.running.publicUrl, user);
    assert.equal(response.status, 303);
    return { browser, cookie: browser.cookie(server.running.publicUrl, SESSION)! };
  }

  describe('browser sessions', () => {
    let server: TestServer;
    let base: string;

    beforeAll(async () => {
      server = await startTestServer({ CORS_ORIGINS: CORS_ORIGIN });
      base = server.running.publicUrl;
    });
    afterAll(() => server?.close());

    test('/auth/login redirects to the issuer with a fresh state, nonce and S256 challenge per attempt', async () => {
      const browser = new WebClient();
      const res = await browser.get(`${base}/auth/login`);
      assert.equal(res.status, 302);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      const [cookie] = res.headers.getSetCookie();
      assert.match(cookie!, /^orders_login=[\w-]{43}; Path=\/auth; HttpOnly; SameSite=Lax; Max-Age=600$/);
      const to = location(res);
      assert.equal(`${to.origin}${to.pathname}`, `${server.running.app.issuer}/auth`);
      const params = Object.fromEntries(to.searchParams);
      assert.deepEqual(Object.keys(params).sort(), [
        'client_id',
        'code_challenge',
        'code_challenge_method',
        'nonce',
        'redirect_uri',
        'response_type',
        'scope',
        'state',
      ]);
      assert.equal(params.response_type, 'code');
      assert.equal(params.client_id, 'orders-web');
      assert.equal(params.redirect_uri, `${base}/auth/callback`);
      assert.equal(params.scope, 'openid email profile orders:read orders:write');
      assert.equal(params.code_challenge_method, 'S256');

      // The verifier stays in the database; only its S256 challenge left the server.
      const [attempt] = await server.running.app.db.query<{ code_verifier: string; state: string; nonce: string }>(
        'select code_verifier, state, nonce from auth_login_attempts where state = $1',
        [params.state],
      );
      assert.equal(attempt!.nonce, params.nonce);
      assert.equal(params.code_challenge, await oidc.calculatePKCECodeChallenge(attempt!.code_verifier));
      assert.ok(!to.href.includes(attempt!.code_verifier));
      assert.ok(!cookie!.includes(attempt!.code_verifier));

      const again = location(await browser.get(`${base}/auth/login`)).searchParams;
      for (const name of ['state', 'nonce', 'code_challenge']) assert.notEqual(again.get(name), params[name]);
    });

    test('the callback starts a session: HttpOnly Lax cookie, only its hash stored, redirect to returnTo', async () => {
      const browser = new WebClient();
      const { response } = await signIn(browser, base, 'alice', '/auth/session');
      assert.equal(response.status, 303);
      assert.equal(response.headers.get('location'), '/auth/session');
      assert.equal(response.headers.get('cache-control'), 'no-store');
      const [clearLogin, session] = response.headers.getSetCookie();
      assert.equal(clearLogin, 'orders_login=; Path=/auth; HttpOnly; SameSite=Lax; Max-Age=0');
      assert.match(session!, /^orders_session=[\w-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=43200$/);

      const id = browser.cookie(base, SESSION)!;
      const rows = await server.running.app.db.query<{ id_hash: string }>(
        'select id_hash from auth_sessions where id_hash = $1 or id_hash = $2',
        [id, createHash('sha256').update(id).digest('base64url')],
      );
      assert.deepEqual(rows, [{ id_hash: createHash('sha256').update(id).digest('base64url') }]);

      const me = await browser.get(`${base}/auth/session`);
      assert.equal(me.status, 200);
      assert.equal(me.headers.get('cache-control'), 'no-store');
      const body = (await me.json()) as Record<string, unknown>;
      assert.match(String(body.expiresAt), /^\d{4}-\d\d-\d\dT/);
      delete body.expiresAt;
      assert.match(String(body.csrfToken), /^[\w-]{43}$/);
      delete body.csrfToken;
      // How she signed in, from the ID token (step-up reads it): a password, just now.
      assert.ok(Math.abs(Date.parse(String(body.authTime)) - Date.now()) < 120_000, String(body.authTime));
      delete body.authTime;
      assert.deepEqual(body, {
        sub: 'alice',
        name: 'Alice Adams',
        email: 'alice@example.com',
        roles: [],
        scopes: ['orders:read', 'orders:write'],
        acr: 'urn:orders:acr:pwd',
        amr: ['pwd'],
      });
    });

    test('/auth/session without a session is 401', async () => {
      const res = await server.http.get('/auth/session');
      assert.equal(res.status, 401);
      assert.equal(res.get('cache-control'), 'no-store');
      assert.equal((res.body as { code: string }).code, 'UNAUTHENTICATED');
    });

    test('the session cookie authenticates /graphql with the roles of the person', async () => {
      const alice = await signedIn(server, 'alice');
      const mine = await alice.browser.graphql(base, ORDERS);
      assert.equal(mine.status, 200);
      assert.deepEqual(customerNames(mine.body.data), ['Alice Adams']);

      const carol = await signedIn(server, 'carol');
      const all = await carol.browser.graphql(base, ORDERS);
      assert.ok(customerNames(all.body.data).length > 2, 'staff see every customer');
    });

    test('a Bearer header wins over the session cookie', async () => {
      const alice = await signedIn(server, 'alice');
      const res = await alice.browser.graphql(base, ORDERS, { authorization: `Bearer ${await server.token('bob')}` });
      assert.deepEqual(customerNames(res.body.data), ['Bob Brown']);
    });

    test('an unknown session cookie on /graphql is 401 UNAUTHENTICATED, not anonymous', async () => {
      const res = await new WebClient().graphql(base, '{ products { sku } }', {
        cookie: `${SESSION}=${'A'.repeat(43)}`,
      });
      assert.equal(res.status, 401);
      assert.deepEqual(
        res.body.errors?.map((e) => e.extensions.code),
        ['UNAUTHENTICATED'],
      );
    });

    test('cookie-bearing /graphql requests from a foreign Origin are refused; own and CORS origins pass', async () => {
      const alice = await signedIn(server, 'alice');
      const evil = await alice.browser.graphql(base, ORDERS, { origin: 'https://evil.example' });
      assert.equal(evil.status, 403);
      assert.deepEqual(
        evil.body.errors?.map((e) => e.extensions.code),
        ['FORBIDDEN'],
      );
      assert.equal(evil.body.data, undefined);
      for (const origin of [new URL(base).origin, CORS_ORIGIN]) {
        const ok = await alice.browser.graphql(base, ORDERS, { origin });
        assert.equal(ok.status, 200, origin);
      }
      // Without a cookie there is nothing to forge: a foreign page may read public data.
      const anonymous = await new WebClient().graphql(base, '{ products { sku } }', { origin: 'https://evil.example' });
      assert.equal(anonymous.status, 200);
    });

    test("Apollo's preflight rule still applies to cookie-bearing requests", async () => {
      const alice = await signedIn(server, 'alice');
      const simple = await alice.browser.post(`${base}/graphql`, { query: ORDERS });
      assert.equal(simple.status, 400);
      const get = await alice.browser.get(`${base}/graphql?query=${encodeURIComponent(ORDERS)}`, {
        accept: 'application/json',
      });
      assert.equal(get.status, 400);
      // Opening /graphql in the browser still shows Sandbox; the page runs nothing by itself.
      const sandbox = await alice.browser.get(`${base}/graphql`, { accept: 'text/html' });
      assert.equal(sandbox.status, 200);
    });

    test('signing in again rotates the session id and ends the previous session', async () => {
      const { browser, cookie: first } = await signedIn(server, 'alice');
      const { response } = await signIn(browser, base, 'alice');
      assert.equal(response.status, 303);
      const second = browser.cookie(base, SESSION)!;
      assert.notEqual(second, first);
      assert.equal((await server.http.get('/auth/session').set({ cookie: `${SESSION}=${first}` })).status, 401);
      assert.equal((await server.http.get('/auth/session').set({ cookie: `${SESSION}=${second}` })).status, 200);
    });

    test('eight sign-ins finishing at once, while a sweep deletes expired sessions, each get a session of their own', async () => {
      const { db, sweeper } = server.running.app;
      // Expired sessions lie in the table in the reverse order of their expiry, as a sweep and a sign-in would meet them.
      await db.query(
        `insert into auth_sessions (id_hash, subject, expires_at)
       select 'expired-' || i, 'alice', now() - make_interval(secs => i) from generate_series(1, 50) i`,
      );
      const users = ['alice', 'bob', 'carol', 'alice', 'bob', 'carol', 'alice', 'bob'];
      const browsers = users.map(() => new WebClient());
      const callbacks = await Promise.all(
        browsers.map(async (browser, i) => signInAtIdp(browser, await startLogin(browser, base), users[i]!)),
      );
      const [answers, swept] = await Promise.all([
        Promise.all(browsers.map((browser, i) => browser.get(callbacks[i]!))),
        sweeper.runOnce(),
      ]);
      assert.deepEqual(
        answers.map((res) => res.status),
        users.map(() => 303),
      );
      assert.equal(swept, true);
      const cookies = browsers.map((browser) => browser.cookie(base, SESSION)!);
      assert.equal(new Set(cookies).size, users.length, 'a session id each');
      const me = await Promise.all(browsers.map((browser) => browser.get(`${base}/auth/session`)));
      assert.deepEqual(
        await Promise.all(me.map(async (res) => [res.status, ((await res.json()) as { sub: string }).sub])),
        users.map((user) => [200, user]),
      );
      assert.deepEqual(await db.query(`select id_hash from auth_sessions where id_hash like 'expired-%'`), []);
    });

    test('a session idle for longer than 30 minutes, or older than 12 hours, is refused', async () => {
      const idle = await signedIn(server, 'alice');
      const old = await signedIn(server, 'alice');
      const hash = (id: string) => createHash('sha256').update(id).digest('base64url');
      const { db } = server.running.app;
      await db.query(`update auth_sessions set last_seen_at = now() - interval '31 minutes' where id_hash = $1`, [
        hash(idle.cookie),
      ]);
      await db.query(
        `update auth_sessions set created_at = now() - interval '13 hours', expires_at = now() - interval '1 hour'
       where id_hash = $1`,
        [hash(old.cookie)],
      );
      for (const { browser } of [idle, old]) {
        assert.equal((await browser.get(`${base}/auth/session`)).status, 401);
        const res = await browser.graphql(base, ORDERS);
        assert.equal(res.status, 401);
        assert.deepEqual(
          res.body.errors?.map((e) => e.extensions.code),
          ['UNAUTHENTICATED'],
        );
      }
    });

    test('logout ends the session server-side and redirects to the IdP end-session endpoint', async () => {
      const { browser, cookie } = await signedIn(server, 'alice');
      const res = await signOut(browser, base, { origin: new URL(base).origin });
      assert.equal(res.status, 303);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assert.deepEqual(res.headers.getSetCookie(), ['orders_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0']);
      const to = location(res);
      assert.equal(`${to.origin}${to.pathname}`, `${server.running.app.issuer}/session/end`);
      assert.equal(to.searchParams.get('post_logout_redirect_uri'), `${base}/`);
      assert.equal(to.searchParams.get('client_id'), 'orders-web');
      assert.match(to.searchParams.get('id_token_hint') ?? '', /^[\w-]+\.[\w-]+\.[\w-]+$/);

      const replay = { cookie: `${SESSION}=${cookie}` };
      assert.equal((await server.http.get('/auth/session').set(replay)).status, 401);
      const gql = await new WebClient().graphql(base, ORDERS, replay);
      assert.equal(gql.status, 401);
      assert.deepEqual(
        gql.body.errors?.map((e) => e.extensions.code),
        ['UNAUTHENTICATED'],
      );
    });

    test('logout from a foreign Origin is refused and the session lives on', async () => {
      const { browser } = await signedIn(server, 'alice');
      const res = await signOut(browser, base, { origin: 'https://evil.example' });
      assert.equal(res.status, 403);
      assert.deepEqual(res.headers.getSetCookie(), []);
      assert.equal((await browser.get(`${base}/auth/session`)).status, 200);
    });
  });

  describe('browser sessions across two app instances', () => {
    let a: TestServer;
    let b: TestServer;

    beforeAll(async () => {
      a = await startTestServer({}, { replicated: true });
      b = await startTestServer(
        { OIDC_ISSUER: a.running.app.issuer, OIDC_CLIENT_ID: 'orders-web', OIDC_CLIENT_SECRET: 'orders-web-secret' },
        { sameDatabaseAs: a },
      );
    });
    afterAll(async () => {
      await b?.close();
      await a?.close();
    });

    test('a session created on one instance is accepted on the other', async () => {
      const fromA = await signedIn(a, 'alice');
      const onB = await new WebClient().graphql(b.running.publicUrl, ORDERS, { cookie: `${SESSION}=${fromA.cookie}` });
      assert.equal(onB.status, 200);
      assert.deepEqual(customerNames(onB.body.data), ['Alice Adams']);

      // B signs in through A's identity provider (its OIDC_ISSUER), and A accepts B's session.
      const fromB = await signedIn(b, 'bob');
      const onA = await new WebClient().graphql(a.running.publicUrl, ORDERS, { cookie: `${SESSION}=${fromB.cookie}` });
      assert.deepEqual(customerNames(onA.body.data), ['Bob Brown']);
    });

    test('logout on one instance is refused on the other immediately', async () => {
      const { browser, cookie } = await signedIn(a, 'alice');
      const replay = { cookie: `${SESSION}=${cookie}` };
      assert.equal((await new WebClient().graphql(b.running.publicUrl, ORDERS, replay)).status, 200);
      const out = await signOut(browser, a.running.publicUrl);
      assert.equal(out.status, 303);
      const onB = await new WebClient().graphql(b.running.publicUrl, ORDERS, replay);
      assert.equal(onB.status, 401);
      assert.deepEqual(
        onB.body.errors?.map((e) => e.extensions.code),
        ['UNAUTHENTICATED'],
      );
    });
  });
});

// ─── was __tests__/integration/auth-logs.test.ts ───
describe('auth-logs', () => {
  const ROOT = new URL('../../', import.meta.url).pathname;

  /** The real process with its real logger (redaction included), logging everything down to debug. */
  function spawnMain(dataDir: string): ChildProcessWithoutNullStreams {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: '0',
      // The default 9464 may be taken by anything else on the machine: tests never depend on a port being free.
      METRICS_PORT: '0',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'debug',
      NODE_ENV: 'development',
    };
    // Logging does not depend on the database engine; the embedded defaults keep this test self-contained.
    delete env.DATABASE_URL;
    delete env.REDIS_URL;
    delete env.NODE_OPTIONS;
    return spawn(process.execPath, appProcessArgs(), { cwd: ROOT, env });
  }

  describe('browser sign-in in the logs', () => {
    let child: ChildProcessWithoutNullStreams;
    const dataDir = testDataDir();
    let output = '';
    let base: string;
    const onOutput = new Set<() => void>();

    /** Resolves with the first match of `pattern` in the log, as soon as it has been written. */
    const logged = (pattern: RegExp) =>
      new Promise<RegExpExecArray>((resolve) => {
        const check = () => {
          const match = pattern.exec(output);
          if (!match) return;
          onOutput.delete(check);
          resolve(match);
        };
        onOutput.add(check);
        check();
      });

    beforeAll(async () => {
      child = spawnMain(dataDir.dataDir);
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        for (const check of [...onOutput]) check();
      });
      const exited = new Promise<never>((_, reject) =>
        child.once('exit', (code) => reject(new Error(`the process exited with ${code}: ${output}`))),
      );
      const listening = await Promise.race([logged(/"url":"([^"]+)"[^\n]*"msg":"orders-api listening"/), exited]);
      base = listening[1]!;
    });
    afterAll(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      }
      dataDir.remove();
    });

    test('never contain the code, state, nonce, tokens, or cookie values of a sign-in', async () => {
      const browser = new WebClient();
      const authorization = await startLogin(browser, base, '/auth/session');
      const loginCookie = browser.cookie(base, 'orders_login')!;
      const callback = await signInAtIdp(browser, authorization, 'alice');
      const done = await browser.get(callback);
      assert.equal(done.status, 303);
      const sessionCookie = browser.cookie(base, 'orders_session')!;
      assert.equal((await browser.graphql(base, '{ viewer { subject } }')).status, 200);
      const csrfToken = ((await (await browser.get(`${base}/auth/session`)).json()) as { csrfToken: string }).csrfToken;
      const logout = location(await browser.post(`${base}/auth/logout`, { csrf: csrfToken }));

      const secrets = {
        state: authorization.searchParams.get('state')!,
        nonce: authorization.searchParams.get('nonce')!,
        code: callback.searchParams.get('code')!,
        loginCookie,
        sessionCookie,
        idToken: logout.searchParams.get('id_token_hint')!,
        csrfToken,
      };
      for (const [name, value] of Object.entries(secrets)) assert.ok(value && value.length >= 20, name);

      // The logout is the last request: once its line is written, so are those of every request before it.
      await logged(/"url":"\/auth\/logout"[^\n]*"msg":"request completed"/);
      const lines = output.split('\n').filter((l) => l.startsWith('{'));
      assert.ok(lines.some((l) => l.includes('"event":"auth.login"') && l.includes('"sub":"alice"')));
      assert.ok(lines.some((l) => l.includes('"url":"/auth/callback?code=[redacted]&state=[redacted]')));
      // Without a query string there is nothing to redact, and the log does not pretend otherwise.
      const logoutLines = lines.filter((l) => l.includes('"url":"/auth/logout"'));
      assert.ok(logoutLines.length);
      for (const line of logoutLines) assert.doesNotMatch(line, /"query":/);
      for (const [name, value] of Object.entries(secrets)) {
        assert.equal(
          lines.find((l) => l.includes(value)),
          undefined,
          `the ${name} appears in the log`,
        );
      }
    });
  });
});

// ─── was __tests__/integration/cookie-csrf.test.ts ───
describe('cookie-csrf', () => {
  const SESSION = 'orders_session';
  const PRODUCTS = '{ products { sku } }';
  const VIEWER = '{ viewer { subject } }';

  /** Reads a whole text/event-stream answer (a query's stream ends after its one result). */
  function eventStream(res: request.Response, done: (err: Error | null, body: string) => void) {
    // Inside a parser, superagent hands over the raw Node response stream.
    const stream = res as unknown as NodeJS.ReadableStream;
    let text = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (text += chunk));
    stream.on('end', () => done(null, text));
  }

  function assertForgeryRefused(res: request.Response) {
    // With the event-stream parser the text is in `body`.
    const text = typeof res.body === 'string' ? res.body : res.text;
    assert.equal(res.status, 400, text);
    assert.match(res.headers['content-type'] ?? '', /^application\/json/);
    const body = JSON.parse(text) as { errors: { message: string; extensions: { code: string } }[] };
    assert.equal(body.errors[0]!.extensions.code, 'BAD_REQUEST');
    assert.match(body.errors[0]!.message, /cross-site request forgery/);
  }

  describe('one cookie-CSRF rule for /graphql and /graphql/stream, keyed on the session cookie', () => {
    let server: TestServer;
    let session: string;
    beforeAll(async () => {
      server = await sharedServer();
      const browser = new WebClient();
      const { response } = await signIn(browser, server.running.publicUrl, 'alice');
      assert.equal(response.status, 303);
      session = `${SESSION}=${browser.cookie(server.running.publicUrl, SESSION)!}`;
    });

    test('a browser holding an unrelated theme=dark cookie reads public products with a simple GET /graphql', async () => {
      const res = await request(server.url)
        .get('/graphql')
        .query({ query: PRODUCTS })
        .set('cookie', 'theme=dark')
        .set('accept', 'application/json')
        .expect(200);
      assert.equal((res.body as { data: { products: unknown[] } }).data.products.length, 20);
    });

    test('a simple GET /graphql carrying the session cookie is refused, with other cookies beside it too', async () => {
      for (const cookie of [session, `theme=dark; ${session}`]) {
        const res = await request(server.url)
          .get('/graphql')
          .query({ query: VIEWER })
          .set('cookie', cookie)
          .set('accept', 'application/json');
        assertForgeryRefused(res);
      }
    });

    test('a simple GET /graphql/stream carrying the session cookie is refused as /graphql refuses it', async () => {
      const res = await request(server.url)
        .get('/graphql/stream')
        .query({ query: VIEWER })
        .set('cookie', session)
        .set('accept', 'text/event-stream')
        .buffer(true)
        .parse(eventStream);
      assertForgeryRefused(res);
    });

    test('a simple POST /graphql/stream (text/plain body) carrying the session cookie is refused', async () => {
      const res = await request(server.url)
        .post('/graphql/stream')
        .set('cookie', session)
        .set('content-type', 'text/plain')
        .set('accept', 'text/event-stream')
        .send(JSON.stringify({ query: VIEWER }))
        .buffer(true)
        .parse(eventStream);
      assertForgeryRefused(res);
    });

    test('GET /graphql/stream with the session cookie and a preflight header runs as the signed-in user', async () => {
      const res = await request(server.url)
        .get('/graphql/stream')
        .query({ query: VIEWER })
        .set('cookie', session)
        .set('accept', 'text/event-stream')
        .set('apollo-require-preflight', 'true')
        .buffer(true)
        .parse(eventStream)
        .expect(200);
      assert.match(res.body as string, /"viewer":\{"subject":"alice"\}/);
    });

    test('POST /graphql/stream as JSON with the session cookie runs (a JSON body needs a preflight)', async () => {
      const res = await request(server.url)
        .post('/graphql/stream')
        .set('cookie', session)
        .set('accept', 'text/event-stream')
        .send({ query: VIEWER })
        .buffer(true)
        .parse(eventStream)
        .expect(200);
      assert.match(res.body as string, /"viewer":\{"subject":"alice"\}/);
    });

    test('a simple GET /graphql/stream with only an unrelated cookie runs a public query', async () => {
      const res = await request(server.url)
        .get('/graphql/stream')
        .query({ query: PRODUCTS })
        .set('cookie', 'theme=dark')
        .set('accept', 'text/event-stream')
        .buffer(true)
        .parse(eventStream)
        .expect(200);
      assert.match(res.body as string, /"products":\[/);
    });

    test('the Sandbox landing page still opens for a signed-in browser', async () => {
      await request(server.url).get('/graphql').set('cookie', session).set('accept', 'text/html').expect(200);
    });
  });
});

// ─── was __tests__/integration/signin-return-to.test.ts ───
describe('signin-return-to', () => {
  /** Values a link could carry in returnTo to send a freshly signed-in browser somewhere else. */
  const HOSTILE = [
    '//evil.example',
    '///evil.example',
    '/\\evil.example',
    '\\\\evil.example',
    '/.//evil.example',
    '/..//evil.example',
    '/%2e//evil.example',
    '/%2E%2E//evil.example',
    '/.%2e//evil.example',
    '/x/../..//evil.example',
    '/%2e%2e/%2e%2e//evil.example',
    '/./\\evil.example',
    '/%5cevil.example',
    '/%5c%5cevil.example',
    '/%2f%2fevil.example',
    '/%09/evil.example',
    '/\t/evil.example',
    '/\n/evil.example',
    '/\r\n//evil.example',
    '/\u0000//evil.example',
    ' //evil.example',
    'https://evil.example/',
    'http:evil.example',
    'http:/\\evil.example',
    'javascript:alert(1)',
    'data:text/html,<script>alert(1)</script>',
    'evil.example',
    '//evil.example@localhost',
    '/@evil.example',
  ];

  /**
   * Where a browser goes with a Location header: a path on this site is one that resolves to this origin and that
   * no browser could re-read as another host (`//host`, `/\host`).
   */
  function assertStaysOnSite(value: string | null, base: string, label: string) {
    assert.ok(value, `${label}: a Location`);
    assert.match(value, /^\/(?![/\\])/, `${label}: Location ${JSON.stringify(value)} is a plain path`);
    // eslint-disable-next-line no-control-regex -- control characters would be stripped by a browser's URL parser
    assert.doesNotMatch(value, /[\u0000-\u001f\u007f\\]/, `${label}: no control characters or backslashes`);
    assert.equal(new URL(value, base).origin, new URL(base).origin, label);
  }

  describe('sign-in sends the browser back only to a path on this site', () => {
    let server: TestServer;
    let base: string;
    beforeAll(async () => {
      server = await sharedServer();
      base = server.running.publicUrl;
    });

    for (const returnTo of HOSTILE) {
      test(`returnTo ${JSON.stringify(returnTo)} is refused or lands on this site after signing in`, async () => {
        // Started on 127.0.0.1 (not PUBLIC_URL's host): checked first, then moved to PUBLIC_URL with the checked value.
        const direct = await request(server.url).get('/auth/login').query({ returnTo });
        if (direct.status === 400) {
          assert.match(direct.text, /returnTo must be a path on this site/);
          return;
        }
        assert.equal(direct.status, 303, direct.text);
        const moved = new URL(direct.headers.location!);
        assert.equal(`${moved.origin}${moved.pathname}`, `${base}/auth/login`);
        assertStaysOnSite(moved.searchParams.get('returnTo'), base, `moved ${JSON.stringify(returnTo)}`);
        const start = await request(base).get(`${moved.pathname}${moved.search}`);
        assert.equal(start.status, 302, start.text);
        const { response } = await signIn(new WebClient(), base, 'alice', returnTo);
        assert.equal(response.status, 303);
        assertStaysOnSite(response.headers.get('location'), base, JSON.stringify(returnTo));
      });
    }

    for (const [returnTo, expected] of [
      [undefined, '/'],
      ['/', '/'],
      ['/graphql?x=1', '/graphql?x=1'],
      ['/auth/session', '/auth/session'],
      ['/a/./b/../c?q=1&r=%2F', '/a/c?q=1&r=%2F'],
    ] as const) {
      test(`returnTo ${JSON.stringify(returnTo)} signs in and lands on ${expected}`, async () => {
        const { response } = await signIn(new WebClient(), base, 'alice', returnTo);
        assert.equal(response.status, 303);
        assert.equal(response.headers.get('location'), expected);
      });
    }
  });
});

// ─── was __tests__/integration/bearer-tokens.test.ts ───
describe('bearer-tokens', () => {
  // Everything Jest can fake except Date.
  const TIMERS = [
    'hrtime',
    'nextTick',
    'performance',
    'queueMicrotask',
    'setImmediate',
    'clearImmediate',
    'setInterval',
    'clearInterval',
    'setTimeout',
    'clearTimeout',
  ] as const;

  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

  describe('Bearer access tokens', () => {
    let server: TestServer;
    let alice: string;
    let rsaKey: JWK;
    beforeAll(async () => {
      server = await sharedServer();
      alice = await server.token('alice');
      // Tokens signed with the IdP's own key prove that each refusal below is for the reason it names.
      const [row] = await server.running.app.db.query<{ jwks: { keys: JWK[] } }>('select jwks from idp_keys');
      rsaKey = row!.jwks.keys.find((k) => k.alg === 'RS256')!;
    });

    const sign = async (claims: Record<string, unknown>, opts: { exp?: number | null; key?: JWK } = {}) => {
      const key = opts.key ?? rsaKey;
      const now = Math.floor(Date.now() / 1000);
      const jwt = new SignJWT({
        iss: server.running.app.issuer,
        aud: 'orders-api',
        sub: 'alice',
        iat: now,
        scope: 'orders:read orders:write',
        roles: [],
        ...claims,
      }).setProtectedHeader({ alg: 'RS256', kid: rsaKey.kid!, typ: 'at+jwt' });
      if (opts.exp !== null) jwt.setExpirationTime(opts.exp ?? now + 300);
      return jwt.sign(await importJWK(key, 'RS256'));
    };

    const ask = (token: string) => server.gql('{ recentOrders(first: 1) { id } }', undefined, { token });

    const assertRefused = async (token: string, description: RegExp) => {
      const res = await ask(token);
      assert.equal(res.status, 401);
      const challenge = res.headers.get('www-authenticate') ?? '';
      assert.match(challenge, /^Bearer realm="orders-api", error="invalid_token"/);
      assert.match(challenge, description);
      assert.equal(res.body.data, undefined);
      assert.equal(res.body.errors?.[0]?.extensions?.code, 'UNAUTHENTICATED');
    };

    test('accepts a token from the PKCE flow', async () => {
      const res = await ask(alice);
      assert.equal(res.status, 200);
      assert.equal(res.body.errors, undefined);
    });

    test('accepts a token signed with the issuer key and the right claims (control for the cases below)', async () => {
      const res = await ask(await sign({}));
      assert.equal(res.status, 200);
      assert.equal(res.body.errors, undefined);
    });

    test('refuses a tampered token', async () => {
      const [header, payload, signature] = alice.split('.');
      const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>;
      await assertRefused(`${header}.${b64({ ...claims, sub: 'bob' })}.${signature}`, /not valid/);
    });

    test('refuses an alg "none" token', async () => {
      const claims = JSON.parse(Buffer.from(alice.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
      await assertRefused(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`, /not valid/);
    });

    test('refuses an expired token', async () => {
      await assertRefused(await sign({}, { exp: Math.floor(Date.now() / 1000) - 60 }), /expired/);
    });

    test('a token accepted once (and remembered) is refused after it expires', async () => {
      const exp = Math.floor(Date.now() / 1000) + 1;
      const token = await sign({}, { exp });
      assert.equal((await ask(token)).status, 200);
      // The clock (Date only; timers stay real) moves past exp plus the 5 s clock tolerance, instead of waiting for it.
      jest.useFakeTimers({ doNotFake: [...TIMERS], advanceTimers: true, now: (exp + 6) * 1000 });
      try {
        await assertRefused(token, /expired/);
      } finally {
        jest.useRealTimers();
      }
    });

    test('refuses a token without exp', async () => {
      await assertRefused(await sign({}, { exp: null }), /not valid/);
    });

    test('refuses a token for another audience', async () => {
      await assertRefused(await sign({ aud: 'another-api' }), /not valid/);
    });

    test('refuses a token from another issuer', async () => {
      await assertRefused(await sign({ iss: 'https://evil.example/' }), /not valid/);
    });

    test('refuses a token signed by another key under the same kid', async () => {
      const { privateKey } = await generateKeyPair('RS256', { extractable: true });
      const { exportJWK } = await import('jose');
      await assertRefused(await sign({}, { key: { ...(await exportJWK(privateKey)), kid: rsaKey.kid } }), /not valid/);
    });

    test('refuses a token that is not yet valid (nbf in the future)', async () => {
      await assertRefused(await sign({ nbf: Math.floor(Date.now() / 1000) + 600 }), /not valid/);
    });

    test('refuses a non-Bearer Authorization header with a Bearer challenge', async () => {
      const res = await server.gql('{ recentOrders { id } }', undefined, {
        headers: { authorization: 'Basic YWxpY2U6YWxpY2U=' },
      });
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="orders-api", error="invalid_request"/);
    });

    test('a valid token without orders:read gets INSUFFICIENT_SCOPE on order data', async () => {
      const res = await ask(await sign({ scope: 'openid profile' }));
      assert.equal(res.status, 200);
      assert.equal(res.body.data, null);
      assert.equal(res.body.errors?.[0]?.extensions?.code, 'INSUFFICIENT_SCOPE');
    });
  });

  /**
   * A replica remembers the tokens it has verified (src/auth/bearer.ts), and must still follow its issuer's key set: a
   * key the issuer no longer publishes stops validating them. The issuer here is an HTTP server on loopback publishing
   * discovery and a JWKS the test changes; the replica fetches that JWKS again once it is OIDC_JWKS_MAX_AGE_S (1 s) old,
   * or on an unknown key id at most that often.
   */
  describe('remembered tokens follow the issuer’s key set', () => {
    let app: TestServer;
    let issuer: Server;
    let issuerUrl: string;
    let published: JWK[] = [];
    let jwksFetches = 0;
    const keyPair = async (kid: string) => {
      const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
      return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
    };
    let first: { kid: string; privateKey: CryptoKey; jwk: JWK };
    let second: { kid: string; privateKey: CryptoKey; jwk: JWK };

    beforeAll(async () => {
      [first, second] = await Promise.all([keyPair('first-key'), keyPair('second-key')]);
      published = [first.jwk];
      issuer = createServer((req, res) => {
        const json = (body: unknown) =>
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
        if (req.url === '/.well-known/openid-configuration')
          return json({ issuer: issuerUrl, jwks_uri: `${issuerUrl}/jwks` });
        if (req.url === '/jwks') {
          jwksFetches++;
          return json({ keys: published });
        }
        res.writeHead(404).end();
      });
      await new Promise<void>((resolve) => issuer.listen(0, '127.0.0.1', resolve));
      issuerUrl = `http://127.0.0.1:${(issuer.address() as AddressInfo).port}`;
      app = await startTestServer({ OIDC_ISSUER: issuerUrl, OIDC_JWKS_MAX_AGE_S: '1' });
    });
    afterAll(async () => {
      await app?.close();
      await new Promise((resolve) => issuer?.close(resolve));
    });

    const tokenOf = (key: { kid: string; privateKey: CryptoKey }, sub = `jwks-${randomUUID()}`) =>
      new SignJWT({ iss: issuerUrl, aud: 'orders-api', sub, scope: 'orders:read', roles: [] })
        .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(key.privateKey);
    const ask = (token: string) => app.gql('{ recentOrders(first: 1) { id } }', undefined, { token });
    const assertRefused = async (token: string) => {
      const res = await ask(token);
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="orders-api", error="invalid_token"/);
      assert.equal(res.body.errors?.[0]?.extensions?.code, 'UNAUTHENTICATED');
    };
    /** Asks until the answer has `status` (each ask is a request: the replica decides when), at most 10 s. */
    const untilStatus = async (token: string, status: number) => {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const res = await ask(token);
        if (res.status === status) return res;
        assert.ok(Date.now() < deadline, `still ${res.status} after 10 s`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };

    test('when a fetch of the JWKS drops a key, a token of that key remembered before is refused on its next request', async () => {
      published = [first.jwk];
      // The JWKS the replica holds may not have the first key yet (another test may have rotated it away): wait for
      // it to be accepted, and then it is remembered.
      const old = await tokenOf(first);
      await untilStatus(old, 200);
      assert.equal((await ask(old)).status, 200);
      const fetchesBefore = jwksFetches;
      // The issuer rotates: the first key is gone. A token of the new key makes the replica fetch the JWKS again.
      published = [second.jwk];
      const fresh = await tokenOf(second);
      assert.equal((await untilStatus(fresh, 200)).body.errors, undefined);
      assert.ok(jwksFetches > fetchesBefore);
      await assertRefused(old);
    });

    test('a remembered token stops validating once the JWKS is older than its max age and no longer has its key', async () => {
      published = [first.jwk];
      // Of the first key, fetched again: wait for the replica to accept it (the JWKS it holds may not have it yet).
      const old = await tokenOf(first);
      await untilStatus(old, 200);
      const fetchesBefore = jwksFetches;
      published = [second.jwk];
      // No request names the new key: only the JWKS growing stale makes the replica look again.
      await untilStatus(old, 401);
      await assertRefused(old);
      assert.ok(jwksFetches > fetchesBefore);
    });

    test('under 20 concurrent requests during a rotation, every answer is 200 before the drop and 401 after it', async () => {
      published = [first.jwk];
      const old = await tokenOf(first);
      await untilStatus(old, 200);
      const answers = await Promise.all(Array.from({ length: 20 }, () => ask(old)));
      assert.deepEqual(
        answers.map((r) => r.status),
        Array.from({ length: 20 }, () => 200),
      );
      published = [second.jwk];
      await untilStatus(await tokenOf(second), 200);
      const after = await Promise.all(Array.from({ length: 20 }, () => ask(old)));
      assert.deepEqual(
        after.map((r) => r.status),
        Array.from({ length: 20 }, () => 401),
      );
    });
  });
});

// ─── was __tests__/integration/issuer-ignores-host.test.ts ───
describe('issuer-ignores-host', () => {
  describe('the embedded issuer names itself as configured, whatever the Host header says', () => {
    let server: TestServer;
    let issuer: string;
    beforeAll(async () => {
      server = await sharedServer();
      issuer = server.running.app.issuer;
    });

    test('the discovery document names the configured issuer, whatever the Host header says', async () => {
      const res = await request(server.url)
        .get('/idp/.well-known/openid-configuration')
        .set('host', 'evil.example')
        .expect(200);
      const doc = res.body as Record<string, unknown>;
      assert.equal(doc.issuer, issuer);
      const urls = Object.entries(doc).filter(([, v]) => typeof v === 'string' && /^https?:/.test(v));
      assert.ok(urls.length >= 5, JSON.stringify(doc));
      for (const [name, url] of urls) assert.ok((url as string).startsWith(`${issuer}/`) || url === issuer, name);
    });

    test('the sign-out page posts to the configured issuer, whatever the Host header says', async () => {
      const res = await request(server.url).get('/idp/session/end').set('host', 'evil.example').expect(200);
      assert.match(res.text, /<form/);
      assert.doesNotMatch(res.text, /evil\.example/);
      assert.ok(res.text.includes(`${issuer}/session/end/confirm`), res.text);
    });
  });

  describe('behind a trusted proxy, a forged X-Forwarded-Host does not move the issuer', () => {
    let server: TestServer;
    let issuer: string;
    beforeAll(async () => {
      server = await startTestServer({ TRUST_PROXY: 'true' });
      issuer = server.running.app.issuer;
    });
    afterAll(() => server.close());

    for (const headers of [
      { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' },
      { host: 'evil.example', 'x-forwarded-host': 'evil.example, localhost' },
      { forwarded: 'host=evil.example;proto=https' },
    ]) {
      test(`discovery with ${JSON.stringify(headers)} names only the configured issuer`, async () => {
        const res = await request(server.url).get('/idp/.well-known/openid-configuration').set(headers).expect(200);
        const text = res.text;
        assert.doesNotMatch(text, /evil\.example/);
        assert.equal((res.body as { issuer: string }).issuer, issuer);
        assert.equal((res.body as { jwks_uri: string }).jwks_uri, `${issuer}/jwks`);
      });
    }
  });
});
