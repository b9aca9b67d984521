import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as oidc from 'openid-client';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { WebClient, location, signIn, signInAtIdp, signOut, startLogin } from '../helpers/webClient.js';

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
    a = await startTestServer();
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
