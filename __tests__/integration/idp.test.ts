import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { pino } from 'pino';
import * as oidc from 'openid-client';
import type { Database } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { createEmbeddedIdp } from '../../src/auth/embeddedIdp.js';
import type { EmbeddedIdp } from '../../src/auth/embeddedIdp.js';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { send } from '../helpers/http.js';
import { testDatabase } from '../helpers/testRun.js';

const run = promisify(execFile);
const projectRoot = fileURLToPath(new URL('../../', import.meta.url));
const JWT_PATTERN = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

describe('embedded IdP', () => {
  let db: Database;
  let server: Server;
  let idp: EmbeddedIdp;
  let publicUrl: string;
  let issuer: string;

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db);

    server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    publicUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    issuer = `${publicUrl}/idp`;

    idp = await createEmbeddedIdp({
      issuer,
      publicUrl,
      db,
      audience: 'orders-api',
      trustProxy: false,
      logger: pino({ level: 'silent' }),
    });
    const app = express();
    app.use('/idp', idp.router);
    server.on('request', app);
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    await idp.close();
    await db.close();
  });

  async function verifyAccessToken(token: string) {
    const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(idp.publicJwks), {
      issuer,
      audience: 'orders-api',
      algorithms: ['RS256'],
      requiredClaims: ['exp'],
    });
    return { payload, protectedHeader };
  }

  /** An authorization request (with PKCE unless told otherwise), without following the redirect. */
  async function authorize(params: Record<string, string>, pkce = true): Promise<Response> {
    const url = new URL(`${issuer}/auth`);
    url.search = new URLSearchParams({
      response_type: 'code',
      scope: 'openid',
      state: 'st4te',
      ...(pkce
        ? { code_challenge: await oidc.calculatePKCECodeChallenge('v'.repeat(43)), code_challenge_method: 'S256' }
        : {}),
      ...params,
    }).toString();
    return send(url, { redirect: 'manual' });
  }

  /** A browser stand-in: keeps cookies and follows redirects while they stay on the IdP. */
  function browser() {
    const cookies = new Map<string, string>();
    async function exchange(url: string | URL, form?: Record<string, string>): Promise<Response> {
      const response = await send(url, {
        method: form ? 'POST' : 'GET',
        headers: {
          cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
          ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        body: form ? new URLSearchParams(form) : undefined,
        redirect: 'manual',
      });
      for (const c of response.headers.getSetCookie()) {
        const [pair = ''] = c.split(';');
        const eq = pair.indexOf('=');
        cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
      }
      return response;
    }
    /** Sends, then follows redirects on the IdP; returns the first page, or the redirect that leaves the IdP. */
    async function go(url: string | URL, form?: Record<string, string>): Promise<Response> {
      let response = await exchange(url, form);
      while (response.status === 303 || response.status === 302) {
        const next = new URL(response.headers.get('location')!, response.url);
        if (!next.href.startsWith(issuer)) return response;
        response = await exchange(next);
      }
      return response;
    }
    return { go };
  }

  test('alice gets an RS256 JWT access token for the orders API', async () => {
    const tokens = await loginWithPkce({ issuer, username: 'alice', password: 'alice' });
    assert.match(tokens.accessToken, JWT_PATTERN);
    assert.equal(tokens.tokenType.toLowerCase(), 'bearer');
    assert.equal(tokens.expiresIn, 3600);
    assert.ok(tokens.idToken, 'an ID token is returned for the openid scope');

    const { payload, protectedHeader } = await verifyAccessToken(tokens.accessToken);
    assert.equal(protectedHeader.alg, 'RS256');
    assert.equal(protectedHeader.typ, 'at+jwt');
    assert.equal(payload.sub, 'alice');
    assert.equal(payload.aud, 'orders-api');
    assert.equal(payload.client_id, 'orders-mobile');
    const scopes = String(payload.scope).split(' ');
    assert.ok(scopes.includes('orders:read'), `scope ${String(payload.scope)}`);
    assert.ok(scopes.includes('orders:write'), `scope ${String(payload.scope)}`);
    assert.deepEqual(payload.roles, []);
    assert.equal(payload.name, 'Alice Adams');
    assert.equal(payload.email, 'alice@example.com');
    assert.equal(payload.exp! - payload.iat!, 3600);

    // First-party apps get a refresh token; refreshed access tokens are for the API too.
    assert.ok(tokens.refreshToken);
    const refreshed = await send(`${issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: tokens.refreshToken,
        client_id: 'orders-mobile',
      }),
    });
    assert.equal(refreshed.status, 200);
    const body = (await refreshed.json()) as { access_token: string; refresh_token: string };
    const again = await verifyAccessToken(body.access_token);
    assert.equal(again.payload.sub, 'alice');
    assert.equal(again.payload.scope, 'orders:read orders:write');
    assert.notEqual(body.refresh_token, tokens.refreshToken, 'public clients get rotated refresh tokens');
  });

  test("carol's token carries the staff role", async () => {
    const { accessToken } = await loginWithPkce({ issuer, username: 'carol', password: 'carol' });
    const { payload } = await verifyAccessToken(accessToken);
    assert.equal(payload.sub, 'carol');
    assert.deepEqual(payload.roles, ['staff']);
  });

  test('a wrong password is refused with a clear message', async () => {
    await assert.rejects(loginWithPkce({ issuer, username: 'alice', password: 'wrong' }), {
      message: 'sign-in failed: wrong username or password',
    });
    await assert.rejects(loginWithPkce({ issuer, username: 'nobody', password: 'nobody' }), {
      message: 'sign-in failed: wrong username or password',
    });
  });

  test('the login form answers a wrong password with 401 and the form again', async () => {
    const started = await authorize({ client_id: 'orders-mobile', redirect_uri: 'http://127.0.0.1/callback' });
    assert.equal(started.status, 303);
    const interactionUrl = new URL(started.headers.get('location')!, issuer);
    assert.match(interactionUrl.pathname, /^\/idp\/interaction\/[\w-]+$/);
    const cookie = started.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');

    const page = await send(interactionUrl, { headers: { cookie } });
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('cache-control'), 'no-store');
    const html = await page.text();
    assert.match(html, /<html lang="en">/);
    assert.match(html, /<label for="username">Username<\/label>/);
    assert.match(html, /<label for="password">Password<\/label>/);
    assert.match(html, /<button type="submit">Sign in<\/button>/);
    assert.ok(html.includes(`action="${interactionUrl.pathname}/login"`));

    const rejected = await send(`${interactionUrl.href}/login`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ username: 'alice', password: 'wrong' }),
      redirect: 'manual',
    });
    assert.equal(rejected.status, 401);
    assert.equal(rejected.headers.get('cache-control'), 'no-store');
    const retry = await rejected.text();
    assert.match(retry, /role="alert">Wrong username or password\.</);
    assert.match(retry, /<form method="post" action="[^"]+\/login">/);
    assert.match(retry, /name="username"[^>]*value="alice"/);
    assert.doesNotMatch(retry, /value="wrong"/);

    const unknownUser = await send(`${interactionUrl.href}/login`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ username: 'mallory', password: 'mallory' }),
      redirect: 'manual',
    });
    assert.equal(unknownUser.status, 401);
    assert.match(await unknownUser.text(), /role="alert">Wrong username or password\.</);
  });

  test('an explicit prompt=consent shows the consent page, and Allow / Cancel work', async () => {
    const start = async () => {
      const b = browser();
      const url = new URL(`${issuer}/auth`);
      url.search = new URLSearchParams({
        client_id: 'orders-web',
        redirect_uri: `${publicUrl}/auth/callback`,
        response_type: 'code',
        scope: 'openid email orders:read',
        prompt: 'consent',
        state: 'c0nsent',
        code_challenge: await oidc.calculatePKCECodeChallenge('v'.repeat(43)),
        code_challenge_method: 'S256',
      }).toString();
      const login = await b.go(url);
      assert.equal(login.status, 200);
      const loginAction = /action="([^"]+\/login)"/.exec(await login.text())![1]!;
      const consent = await b.go(new URL(loginAction, issuer), { username: 'bob', password: 'bob' });
      assert.equal(consent.status, 200);
      assert.equal(consent.headers.get('cache-control'), 'no-store');
      return { b, consent: await consent.text() };
    };

    const allowed = await start();
    assert.match(allowed.consent, /<h1>Allow access\?<\/h1>/);
    assert.match(allowed.consent, /<strong>Orders web<\/strong> asks to:/);
    assert.match(allowed.consent, /<code>email<\/code>/);
    assert.match(allowed.consent, /<code>orders:read<\/code>/);
    const confirmAction = /<form method="post" action="([^"]+\/confirm)"><button type="submit">Allow<\/button>/.exec(
      allowed.consent,
    )![1]!;
    const done = await allowed.b.go(new URL(confirmAction, issuer), {});
    assert.equal(done.status, 303);
    const callback = new URL(done.headers.get('location')!);
    assert.equal(`${callback.origin}${callback.pathname}`, `${publicUrl}/auth/callback`);
    assert.ok(callback.searchParams.get('code'));
    assert.equal(callback.searchParams.get('state'), 'c0nsent');

    const cancelled = await start();
    const abortAction =
      /<form method="post" action="([^"]+\/abort)"><button type="submit" class="secondary">Cancel<\/button>/.exec(
        cancelled.consent,
      )![1]!;
    const denied = await cancelled.b.go(new URL(abortAction, issuer), {});
    assert.equal(denied.status, 303);
    const deniedCallback = new URL(denied.headers.get('location')!);
    assert.equal(deniedCallback.searchParams.get('error'), 'access_denied');
    assert.equal(deniedCallback.searchParams.get('code'), null);
  });

  test('sign-out shows an accessible confirmation and returns to an orders-web replica', async () => {
    const b = browser();
    const start = new URL(`${issuer}/auth`);
    start.search = new URLSearchParams({
      client_id: 'orders-web',
      redirect_uri: `${publicUrl}/auth/callback`,
      response_type: 'code',
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge('v'.repeat(43)),
      code_challenge_method: 'S256',
    }).toString();
    const login = await b.go(start);
    const loginAction = /action="([^"]+\/login)"/.exec(await login.text())![1]!;
    const signedIn = await b.go(new URL(loginAction, issuer), { username: 'alice', password: 'alice' });
    assert.equal(signedIn.status, 303);
    assert.ok(new URL(signedIn.headers.get('location')!).searchParams.get('code'));

    const replicaHome = 'http://localhost:45679/';
    const endSession = new URL(`${issuer}/session/end`);
    endSession.search = new URLSearchParams({
      client_id: 'orders-web',
      post_logout_redirect_uri: replicaHome,
    }).toString();
    const confirm = await b.go(endSession);
    assert.equal(confirm.status, 200);
    const html = await confirm.text();
    assert.match(html, /<html lang="en">/);
    assert.match(html, /<main>\s*<h1>Sign out\?<\/h1>/);
    assert.match(
      html,
      /<button type="submit" form="op\.logoutForm" name="logout" value="yes">Yes, sign me out<\/button>/,
    );
    const action = /<form id="op\.logoutForm" method="post" action="([^"]+)">/.exec(html)![1]!;
    const xsrf = /name="xsrf" value="([^"]+)"/.exec(html)![1]!;

    const done = await b.go(action, { xsrf, logout: 'yes' });
    assert.equal(done.status, 303);
    assert.equal(done.headers.get('location'), replicaHome);

    const refused = await send(
      `${issuer}/session/end?client_id=orders-web&post_logout_redirect_uri=${encodeURIComponent('https://evil.example/')}`,
      { redirect: 'manual' },
    );
    assert.equal(refused.status, 400);
    assert.match(await refused.text(), /post_logout_redirect_uri not registered/);
  });

  test('discovery advertises S256 only and PKCE is required', async () => {
    const discovery = await send(`${issuer}/.well-known/openid-configuration`);
    assert.equal(discovery.status, 200);
    const metadata = (await discovery.json()) as Record<string, unknown>;
    assert.equal(metadata.issuer, issuer);
    assert.deepEqual(metadata.code_challenge_methods_supported, ['S256']);
    assert.deepEqual(metadata.response_types_supported, ['code']);

    // The redirect URI is valid, so the error goes back to the client in the redirect.
    const withoutPkce = await authorize({ client_id: 'orders-web', redirect_uri: `${publicUrl}/auth/callback` }, false);
    assert.equal(withoutPkce.status, 303);
    const location = new URL(withoutPkce.headers.get('location')!);
    assert.equal(`${location.origin}${location.pathname}`, `${publicUrl}/auth/callback`);
    assert.equal(location.searchParams.get('error'), 'invalid_request');
    assert.equal(
      location.searchParams.get('error_description'),
      'Authorization Server policy requires PKCE to be used for this request',
    );
    assert.equal(location.searchParams.get('state'), 'st4te');
    assert.equal(location.searchParams.get('code'), null);

    const plain = await authorize({
      client_id: 'orders-mobile',
      redirect_uri: 'http://127.0.0.1/callback',
      code_challenge: 'v'.repeat(43),
      code_challenge_method: 'plain',
    });
    assert.equal(plain.status, 303);
    const plainLocation = new URL(plain.headers.get('location')!);
    assert.equal(plainLocation.searchParams.get('error'), 'invalid_request');
    assert.equal(plainLocation.searchParams.get('error_description'), 'not supported value of code_challenge_method');
  });

  test('signing keys persist: a second instance over the same database publishes the same keys', async () => {
    const second = await createEmbeddedIdp({
      issuer,
      publicUrl,
      db,
      audience: 'orders-api',
      trustProxy: false,
      logger: pino({ level: 'silent' }),
    });
    try {
      assert.deepEqual(second.publicJwks, idp.publicJwks);
      const rsa = idp.publicJwks.keys.find((k) => k.alg === 'RS256');
      assert.ok(rsa?.kid);
      assert.equal(rsa.use, 'sig');
      for (const key of idp.publicJwks.keys) {
        assert.equal(key.d, undefined, 'no private key material in the public JWKS');
        assert.equal(key.p, undefined);
      }
      const [row] = await db.query<{ n: number }>('select count(*)::int as n from idp_keys');
      assert.equal(row!.n, 1);

      // A token from the first instance verifies with the keys the second one loaded.
      const { accessToken } = await loginWithPkce({ issuer, username: 'bob', password: 'bob' });
      const { payload } = await jwtVerify(accessToken, createLocalJWKSet(second.publicJwks), {
        issuer,
        audience: 'orders-api',
        algorithms: ['RS256'],
      });
      assert.equal(payload.sub, 'bob');
    } finally {
      await second.close();
    }
  });

  test('idp_users holds Argon2id hashes, never the passwords', async () => {
    const rows = await db.query<{ username: string; subject: string; roles: unknown; password_hash: string }>(
      'select username, subject, roles, password_hash from idp_users order by username',
    );
    assert.deepEqual(
      rows.map((r) => [r.username, r.subject, r.roles]),
      [
        ['alice', 'alice', []],
        ['bob', 'bob', []],
        ['carol', 'carol', ['staff']],
      ],
    );
    for (const row of rows) {
      assert.ok(row.password_hash.startsWith('$argon2id$'), row.password_hash.slice(0, 12));
      assert.ok(!row.password_hash.includes(row.username));
    }
  });

  test('orders-web may return to another loopback port, but not to another host', async () => {
    for (const redirectUri of ['http://127.0.0.1:45678/auth/callback', 'http://localhost:5173/auth/callback']) {
      const accepted = await authorize({ client_id: 'orders-web', redirect_uri: redirectUri });
      assert.equal(accepted.status, 303, redirectUri);
      assert.match(new URL(accepted.headers.get('location')!, issuer).pathname, /^\/idp\/interaction\/[\w-]+$/);
    }

    for (const redirectUri of [
      'https://evil.example/auth/callback',
      'http://127.0.0.1:45678/elsewhere',
      'http://127.0.0.1.evil.example:45678/auth/callback',
    ]) {
      const refused = await authorize({ client_id: 'orders-web', redirect_uri: redirectUri });
      assert.equal(refused.status, 400, redirectUri);
      assert.equal(refused.headers.get('location'), null);
      const page = await refused.text();
      assert.match(page, /<p>redirect_uri did not match any of the client&#39;s registered redirect_uris<\/p>/);
      assert.match(page, /<small>invalid_redirect_uri<\/small>/);
    }

    // The native client's loopback redirect URI is matched on any port (RFC 8252).
    const native = await authorize({ client_id: 'orders-mobile', redirect_uri: 'http://127.0.0.1:61234/callback' });
    assert.equal(native.status, 303);
    assert.match(new URL(native.headers.get('location')!, issuer).pathname, /^\/idp\/interaction\//);
  });

  test('the token CLI prints just the access token', async () => {
    const { stdout, stderr } = await run(
      process.execPath,
      ['--import', 'tsx', 'src/cli/token.ts', '--user', 'alice', '--issuer', issuer],
      { cwd: projectRoot, timeout: 60_000 },
    );
    assert.equal(stderr.includes('eyJ'), false);
    const lines = stdout.split('\n');
    assert.equal(lines.length, 2);
    assert.equal(lines[1], '');
    assert.match(lines[0]!, JWT_PATTERN);
    const { payload } = await verifyAccessToken(lines[0]!);
    assert.equal(payload.sub, 'alice');
  });

  test('the token CLI exits 1 with a message on a wrong password', async () => {
    const failed = await run(
      process.execPath,
      ['--import', 'tsx', 'src/cli/token.ts', '--user', 'alice', '--password', 'wrong', '--issuer', issuer],
      { cwd: projectRoot, timeout: 60_000 },
    ).then(
      () => assert.fail('the CLI should have failed'),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    assert.equal(failed.code, 1);
    assert.equal(failed.stdout, '');
    assert.match(failed.stderr, /token: sign-in failed: wrong username or password/);
  });
});
