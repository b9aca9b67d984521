// The embedded identity provider, its second factors and step-up, in one Jest file: a file loads its modules into a
// fresh context and costs about 1.5 s of CPU before its first test (docs/testing.md#how-long-it-takes). Each top-level
// describe block below was a test file of its own, named after it (the comment above it gives the old file name), with
// its tests unchanged; idp-metadata, step-up and the second factors' "users no other test changes" share one default
// server (sharedServer below), and every other block starts the servers it starts.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setImmediate } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import express from 'express';
import { createLocalJWKSet, decodeJwt, importJWK, type JWK, jwtVerify, SignJWT } from 'jose';
import * as oidc from 'openid-client';
import pg from 'pg';
import { pino } from 'pino';
import request from 'supertest';
import { createEmbeddedIdp, type EmbeddedIdp } from '../../src/auth/embeddedIdp.js';
import { DEMO_TOTP_SECRETS } from '../../src/auth/idp/demoTotp.js';
import { SIGNIN_LIMITS } from '../../src/auth/idp/signinThrottle.js';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { createLogger } from '../../src/logger.js';
import type { Database } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { POOL_SIZE } from '../../src/store/postgres.js';
import { type Problem, send } from '../helpers/http.js';
import { rest, type RestResponse } from '../helpers/openapi.js';
import { answerTotp, enrolmentCode, follow, formAction, totpCode } from '../helpers/secondFactor.js';
import { mfaLogin, startTestServer, type TestServer } from '../helpers/server.js';
import { sharedTestServer } from '../helpers/sharedServer.js';
import { SoftAuthenticator, webauthnOptions } from '../helpers/softAuthenticator.js';
import { startSwitchableIssuer, type SwitchableIssuer } from '../helpers/switchableIssuer.js';
import { testDatabase } from '../helpers/testRun.js';
import { send as sendOver, type Transport } from '../helpers/transports.js';
import { location, signIn, signInAtIdp, startLogin, WebClient } from '../helpers/webClient.js';

/** The default server, for the blocks below that own their data (see the helper). */
const sharedServer = sharedTestServer({ replicated: true });

// ─── was __tests__/integration/idp.test.ts ───
describe('idp', () => {
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
      const withoutPkce = await authorize(
        { client_id: 'orders-web', redirect_uri: `${publicUrl}/auth/callback` },
        false,
      );
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
});

// ─── was __tests__/integration/idp-metadata.test.ts ───
describe('idp-metadata', () => {
  /** What the embedded IdP's discovery document promises, checked with a relying party's own library. */
  describe('embedded IdP metadata tells the truth', () => {
    let server: TestServer;
    let issuer: string;
    let apiUrl: string;
    beforeAll(async () => {
      server = await sharedServer();
      issuer = server.running.app.issuer;
      apiUrl = server.running.publicUrl;
    });

    const login = (opts: { user?: string; scope?: string; resource?: string } = {}) =>
      loginWithPkce({
        issuer,
        username: opts.user ?? 'alice',
        password: opts.user ?? 'alice',
        ...(opts.scope ? { scope: opts.scope } : {}),
        ...(opts.resource ? { resource: opts.resource } : {}),
      });

    const userinfo = (token: string) =>
      server.http.get('/idp/me').set('authorization', `Bearer ${token}`).set('accept', 'application/json');

    test('discovery lists the API scopes in scopes_supported', async () => {
      const res = await server.http.get('/idp/.well-known/openid-configuration');
      assert.equal(res.status, 200);
      const metadata = res.body as {
        scopes_supported: string[];
        userinfo_endpoint: string;
        grant_types_supported: string[];
      };
      assert.deepEqual([...metadata.scopes_supported].sort(), [
        'email',
        'offline_access',
        'openid',
        'orders:read',
        'orders:write',
        'profile',
        'scim',
      ]);
      assert.equal(metadata.userinfo_endpoint, `${issuer}/me`);
      // The development directory's client-credentials grant (SCIM provisioning).
      assert.ok(metadata.grant_types_supported.includes('client_credentials'));
    });

    test('scope scim is the directory client alone: a person who asks for it signs in without it', async () => {
      const tokens = await login({ scope: 'openid orders:read scim' });
      assert.equal(decodeJwt(tokens.accessToken).scope, 'orders:read');
    });

    test("openid-client's fetchUserInfo works with the access token of a code + PKCE flow, which the API takes too", async () => {
      const tokens = await login();
      const claims = await oidc.fetchUserInfo(tokens.config, tokens.accessToken, 'alice');
      assert.deepEqual(
        { ...claims },
        {
          sub: 'alice',
          name: 'Alice Adams',
          preferred_username: 'alice',
          email: 'alice@example.com',
          email_verified: true,
        },
      );
      // A refreshed access token answers at userinfo too.
      const refreshed = await oidc.refreshTokenGrant(tokens.config, tokens.refreshToken!);
      assert.equal(
        (await oidc.fetchUserInfo(tokens.config, refreshed.access_token, 'alice')).email,
        'alice@example.com',
      );
      const api = await server.gql('{ viewer { id subject scopes } }', undefined, { token: tokens.accessToken });
      assert.deepEqual(api.body.data, {
        viewer: { id: 'alice', subject: 'alice', scopes: ['orders:read', 'orders:write'] },
      });
    });

    test('userinfo releases only the claims of the scopes the sign-in asked for', async () => {
      const tokens = await login({ user: 'bob', scope: 'openid orders:read' });
      const claims = await oidc.fetchUserInfo(tokens.config, tokens.accessToken, 'bob');
      assert.deepEqual({ ...claims }, { sub: 'bob' });
    });

    test('userinfo refuses what the IdP did not issue: a self-signed token, a tampered one, a bare jti', async () => {
      // Any token the IdP issued to alice will do: the one the server keeps for her (step-up's), not a sign-in of its own.
      const accessToken = await server.token('alice');
      const [row] = await server.running.app.db.query<{ jwks: { keys: JWK[] } }>('select jwks from idp_keys');
      const key = row!.jwks.keys.find((k) => k.alg === 'RS256')!;
      const issued = decodeJwt(accessToken);
      // Signed with the IdP's own key and shaped like its tokens, but never issued: there is no grant behind it.
      const forged = await new SignJWT({ ...issued, jti: 'never-issued' })
        .setProtectedHeader({ alg: 'RS256', kid: key.kid!, typ: 'at+jwt' })
        .sign(await importJWK(key, 'RS256'));
      const [header, payload, signature] = accessToken.split('.');
      const tampered = `${header}.${payload}.${signature!.slice(0, -4)}AAAA`;
      for (const token of [forged, tampered, String(issued.jti)]) {
        const res = await userinfo(token);
        assert.equal(res.status, 401, token);
        assert.match(String(res.get('www-authenticate')), /^Bearer .*error="invalid_token"/);
        assert.equal((res.body as { error: string }).error, 'invalid_token');
      }
      assert.equal((await userinfo(accessToken)).status, 200);
    });

    test('the documented resource values both give an API token: urn:orders-api and the API URL', async () => {
      for (const resource of ['urn:orders-api', apiUrl]) {
        const tokens = await login({ resource });
        assert.equal(decodeJwt(tokens.accessToken).aud, 'orders-api', resource);
        const api = await server.gql('{ viewer { subject } }', undefined, { token: tokens.accessToken });
        assert.deepEqual(api.body.data, { viewer: { subject: 'alice' } }, resource);
        assert.equal((await userinfo(tokens.accessToken)).status, 200, resource);
      }
    });

    test('a resource is compared as a normalized URI (RFC 3986 §6.2): the API URL with its slash, or in capitals', async () => {
      const url = new URL(apiUrl);
      const spellings = [
        // `new URL()` adds this slash; §6.2.3 makes an empty path and "/" the same.
        `${apiUrl}/`,
        // §6.2.2.1: scheme and host are case-insensitive.
        `HTTP://${url.host.toUpperCase()}`,
        // §6.2.2.3: dot segments go.
        `${apiUrl}/./`,
        'URN:orders-api',
      ];
      for (const resource of spellings) {
        const tokens = await login({ resource });
        assert.equal(decodeJwt(tokens.accessToken).aud, 'orders-api', resource);
        const api = await server.gql('{ viewer { subject } }', undefined, { token: tokens.accessToken });
        assert.deepEqual(api.body.data, { viewer: { subject: 'alice' } }, resource);
      }
      // Equal after normalization only: another path is another resource.
      await assert.rejects(login({ resource: `${apiUrl}/%7Eother` }), {
        message: `authorization failed: invalid_target (the only resource here is the orders API: urn:orders-api or ${apiUrl})`,
      });
    });

    test('any other resource is invalid_target, naming the ones there are', async () => {
      await assert.rejects(login({ resource: 'orders-api' }), {
        message: 'authorization failed: invalid_target (resource indicator must be an absolute URI)',
      });
      await assert.rejects(login({ resource: 'https://elsewhere.example/api' }), {
        message: `authorization failed: invalid_target (the only resource here is the orders API: urn:orders-api or ${apiUrl})`,
      });
    });
  });
});

// ─── was __tests__/integration/idp-second-factors.test.ts ───
describe('idp-second-factors', () => {
  const MFA = 'urn:orders:acr:mfa';
  const CAROL = DEMO_TOTP_SECRETS.carol!;

  interface SessionInfo {
    sub: string;
    acr: string | null;
    amr: string[] | null;
    authTime: string | null;
  }
  type CreationOptions = Parameters<SoftAuthenticator['register']>[0];
  type RequestOptions = Parameters<SoftAuthenticator['assert']>[0];

  const NO_CODE =
    'Adding your first factor needs the enrolment code your administrator gave you: this one is missing, wrong, expired or already used.';
  const VERIFY_FIRST = 'Verify with your second factor before you change your factors.';
  /** The message of a refusal page (`<p>` after its heading). */
  const refusalOf = (html: string) => /<\/h1>\s*<p>([^<]*)<\/p>/.exec(html)?.[1]?.replace(/&#39;/g, "'") ?? null;

  /** The text of a page's alert (the error it shows), or null. */
  const alertOf = (html: string) => /role="alert">([^<]*)</.exec(html)?.[1]?.replace(/&#39;/g, "'") ?? null;

  describe('the embedded IdP’s second factors refuse bad input clearly, and lock out no one else', () => {
    let server: TestServer;
    let base: string;
    let rp: string;
    /** Every line the server logs, down to debug, through the real logger (its redaction and serializers). */
    const logLines: string[] = [];

    beforeAll(async () => {
      const logger = createLogger('debug', { destination: { write: (line: string) => void logLines.push(line) } });
      server = await startTestServer({}, { logger });
      base = server.running.publicUrl;
      rp = new URL(base).origin;
    });
    afterAll(() => server.close());

    /** Follows redirects until a page answers; a redirect to the app's callback is taken, making the session. */
    async function settle(browser: WebClient, res: Response): Promise<Response> {
      for (let step = 0; step < 12 && res.status >= 300 && res.status < 400; step++)
        res = await browser.get(location(res));
      return res;
    }

    /** /auth/login (with a step-up query) as far as the IdP's first page. */
    async function startAt(browser: WebClient, query = '', at = base): Promise<Response> {
      return settle(browser, await browser.get(`${at}/auth/login${query}`));
    }

    async function password(browser: WebClient, page: Response, user: string): Promise<Response> {
      const action = formAction(await page.clone().text(), page.url, 'login');
      assert.ok(action, 'a sign-in form');
      return settle(browser, await browser.post(action, { username: user, password: user }));
    }

    /** At the TOTP step of a sign-in asking for the MFA level. */
    async function atTotpStep(user: string, at = base): Promise<{ browser: WebClient; action: URL }> {
      const browser = new WebClient();
      const page = await password(browser, await startAt(browser, `?acr_values=${MFA}`, at), user);
      const action = formAction(await page.text(), page.url, 'totp');
      assert.ok(action, `${user} is asked for a code`);
      return { browser, action };
    }

    const sessionOf = async (browser: WebClient, at = base) => {
      const res = await browser.get(`${at}/auth/session`);
      return res.status === 200 ? ((await res.json()) as SessionInfo) : null;
    };

    async function signedInWithPassword(user: string, at = base): Promise<WebClient> {
      const browser = new WebClient();
      const home = await password(browser, await startAt(browser, '', at), user);
      assert.equal(home.status, 200);
      assert.equal((await sessionOf(browser, at))?.sub, user);
      return browser;
    }

    const accountPage = async (browser: WebClient, at = base) => {
      const res = await browser.get(`${at}/idp/account`);
      const html = await res.text();
      return { res, html, csrf: /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? '' };
    };

    describe('forms with more fields than they have, and addresses that name no interaction', () => {
      const SECRET = 'Hunter2-SECRET-PW';
      /** A form of `count` fields: the username and password, then padding. */
      const fieldsOf = (count: number) => ({
        username: 'nobody',
        password: SECRET,
        ...Object.fromEntries(Array.from({ length: count - 2 }, (_, i) => [`x${i}`, '1'])),
      });

      test('every sign-in step refuses one field more than its form reads with 413 and a page, 8 at once too; the password is in no log line', async () => {
        const { browser, action: totp } = await atTotpStep('carol');
        const uid = totp.pathname.split('/').at(-2)!;
        const at = (step: string) => new URL(`/idp/interaction/${uid}/${step}`, base);
        // The sign-in form reads 10 fields: at the limit it is read (a wrong password: 401), one past it is not.
        const signIn = new WebClient();
        const login = formAction(await (await startAt(signIn)).text(), base, 'login')!;
        assert.equal((await signIn.post(login, fieldsOf(10))).status, 401);
        // The second-factor forms read 5: at the limit the passkey form is read (and finds no answer in it).
        assert.equal((await browser.post(at('passkey'), fieldsOf(5))).status, 400);
        const refusals = [
          [login, 11],
          [at('confirm'), 11],
          [at('abort'), 11],
          [totp, 6],
          [at('passkey'), 6],
        ] as const;
        for (const [url, count] of refusals) {
          const res = await browser.post(url, fieldsOf(count));
          assert.equal(res.status, 413, url.pathname);
          assert.match(res.headers.get('content-type')!, /^text\/html/);
          assert.match(await res.text(), /The form sent more than a sign-in ever needs, so it was not read\./);
        }
        const together = await Promise.all(Array.from({ length: 8 }, () => browser.post(login, fieldsOf(30))));
        assert.deepEqual(
          together.map((r) => r.status),
          Array(8).fill(413),
        );
        // The account page's forms read 5 fields, the app's sign-out form 5: one past is 413 there too.
        const account = await browser.post(`${base}/idp/account/totp`, fieldsOf(6), { origin: rp });
        assert.equal(account.status, 413);
        assert.match(await account.text(), /The form sent more than adding a factor ever needs, so it was not read\./);
        const signOut = await browser.post(`${base}/auth/logout`, fieldsOf(6));
        assert.equal(signOut.status, 413);
        assert.equal(signOut.headers.get('content-type'), 'application/problem+json; charset=utf-8');
        // Nothing was spent: carol's sign-in still waits for her code.
        const page = await browser.get(new URL(`/idp/interaction/${uid}`, base));
        assert.equal(page.status, 200);
        assert.ok(formAction(await page.text(), page.url, 'totp'));
        assert.ok(logLines.length > 0);
        assert.deepEqual(
          logLines.filter((line) => line.includes(SECRET)),
          [],
        );
        assert.deepEqual(
          logLines.filter((line) => /"level":(50|60)/.test(line)),
          [],
        );
      });

      test('an interaction path that is not percent-encoded UTF-8 is 400 and a page, on every step, GET or POST', async () => {
        for (const path of ['', '/login', '/totp', '/confirm', '/abort', '/passkey']) {
          for (const method of ['GET', 'POST'] as const) {
            const url = `${base}/idp/interaction/%ZZ${path}`;
            const browser = new WebClient();
            const res = method === 'GET' ? await browser.get(url) : await browser.post(url, { code: '123456' });
            assert.equal(res.status, 400, `${method} ${path}`);
            assert.match(await res.text(), /This sign-in address is not valid\./, `${method} ${path}`);
          }
        }
        assert.deepEqual(
          logLines.filter((line) => /"level":(50|60)/.test(line)),
          [],
        );
      });
    });

    describe('TOTP', () => {
      test('alice enrols an authenticator app on the account page: a QR code and the secret, confirmed by a code', async () => {
        const browser = await signedInWithPassword('alice');
        const { res, html, csrf } = await accountPage(browser);
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-security-policy')!, /script-src 'self'/);
        assert.match(html, /<div class="qr" data-testid="totp-qr"><svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
        assert.match(html, /<input id="enrolment-code-totp" name="enrolment_code" type="text"/);
        const secret = /data-testid="totp-secret">([A-Z2-7]+)</.exec(html)![1]!;
        // Her administrator's code, typed as a person might: lower case, spaces for hyphens.
        const code = (await enrolmentCode(base, 'alice')).toLowerCase().replace(/-/g, ' ');
        const form = { csrf, secret, enrolment_code: code };
        const wrong = await browser.post(`${base}/idp/account/totp`, { ...form, code: '000000' }, { origin: rp });
        assert.equal(wrong.status, 401);
        assert.match(alertOf(await wrong.text())!, /^That code does not match the new secret/);
        // A wrong app code did not spend the enrolment code. Sent twice at once, it binds one secret and refuses the
        // other (the code spent by the first, or the account now has a factor that this session did not use).
        const second = await accountPage(browser);
        const other = /data-testid="totp-secret">([A-Z2-7]+)</.exec(second.html)![1]!;
        const [first, racing] = await Promise.all(
          [secret, other].map(async (s) =>
            browser.post(
              `${base}/idp/account/totp`,
              { csrf, secret: s, enrolment_code: code, code: await totpCode(s) },
              { origin: rp },
            ),
          ),
        );
        assert.deepEqual([first.status, racing.status].sort(), [200, 403]);
        const [on, refused] = first.status === 200 ? [first, racing] : [racing, first];
        const bound = on === first ? secret : other;
        assert.match(await on.text(), /data-testid="totp-state">On:/);
        assert.ok([NO_CODE, VERIFY_FIRST].includes(refusalOf(await refused.text())!));

        // The code that confirmed the secret is spent; the next one signs alice in with two factors.
        const { browser: next, action } = await atTotpStep('alice');
        const done = await settle(next, await next.post(action, { code: await totpCode(bound, 1) }));
        assert.equal(done.status, 200);
        assert.deepEqual(await sessionOf(next), { ...(await sessionOf(next))!, acr: MFA, amr: ['pwd', 'otp', 'mfa'] });
      });

      test('8 sign-ins send one code at once: one signs in, seven are told it was already used; sent again later, it is refused too', async () => {
        const attempts = await Promise.all(Array.from({ length: 8 }, () => atTotpStep('carol')));
        const code = await totpCode(CAROL);
        const answers = await Promise.all(attempts.map(({ browser, action }) => browser.post(action, { code })));
        assert.deepEqual(answers.map((r) => r.status).sort(), [303, 401, 401, 401, 401, 401, 401, 401]);
        for (const res of answers.filter((r) => r.status === 401)) {
          assert.equal(
            alertOf(await res.text()),
            'This code was already used. Wait for the next code in your authenticator app.',
          );
        }
        const winner = attempts[answers.findIndex((r) => r.status === 303)]!;
        await settle(
          winner.browser,
          answers.find((r) => r.status === 303)!,
        );
        assert.deepEqual((await sessionOf(winner.browser))?.amr, ['pwd', 'otp', 'mfa']);

        const replay = await atTotpStep('carol');
        const again = await replay.browser.post(replay.action, { code });
        assert.equal(again.status, 401);
        assert.equal(
          alertOf(await again.text()),
          'This code was already used. Wait for the next code in your authenticator app.',
        );
      });
    });

    describe('passkeys', () => {
      const bob = new SoftAuthenticator('');

      /**
       * Bob's passkey, bound with the enrolment code issued to him, and used once to sign in (so the server holds a
       * signature counter past 1): the tests below sign in with it.
       */
      beforeAll(async () => {
        Object.assign(bob, { origin: rp });
        const browser = await signedInWithPassword('bob');
        const { html, csrf } = await accountPage(browser);
        const res = await browser.post(
          `${base}/idp/account/passkeys`,
          {
            csrf,
            response: bob.register(webauthnOptions<CreationOptions>(html)),
            enrolment_code: await enrolmentCode(base, 'bob'),
          },
          { origin: rp },
        );
        assert.equal(res.status, 200, alertOf(await res.text()) ?? '');
        const step = await passkeyStep();
        await settle(step.browser, await step.browser.post(step.action, { response: bob.assert(step.options) }));
        assert.equal((await sessionOf(step.browser))?.sub, 'bob');
      });

      /** Bob's sign-in page (or second-factor page), its options, and where the answer goes. */
      async function passkeyStep(query = '', user?: string, at = base) {
        const browser = new WebClient();
        let page = await startAt(browser, query, at);
        if (user) page = await password(browser, page, user);
        else {
          // The sign-in page's second button: a passkey instead of the password.
          const login = formAction(await page.text(), page.url, 'login')!;
          page = await settle(browser, await browser.post(login, { method: 'passkey' }));
        }
        const html = await page.text();
        const action = formAction(html, page.url, 'passkey');
        assert.ok(action, 'a passkey form');
        return { browser, action, options: webauthnOptions<RequestOptions>(html) };
      }

      /**
       * On the file's shared server, not this block's, whose users' factors no other test changes (the tests of a block
       * may run in any order): bob before he has any factor (this block's server gives him a passkey first), alice who
       * never gets one, and carol's authenticator app that no other test locks. The blocks there (idp-metadata,
       * step-up) sign the three in, carol with her code, and never add, change or lock a factor; what these tests
       * leave (bob's passkey; carol's five wrong codes, half her lock, which at most delay her next code by 50 ms)
       * none of them reads.
       */
      describe('users no other test changes', () => {
        let own: TestServer;
        let ownBase: string;
        let ownRp: string;
        const firstBob = new SoftAuthenticator('');
        beforeAll(async () => {
          own = await sharedServer();
          ownBase = own.running.publicUrl;
          ownRp = new URL(ownBase).origin;
          Object.assign(firstBob, { origin: ownRp });
        });

        test('a wrong code is refused with the form again, and no session', async () => {
          // carol's own authenticator app: no other test here spends her attempts or locks it.
          const { browser, action } = await atTotpStep('carol', ownBase);
          for (const code of ['123456', '12345', 'abcdef', '1'.repeat(17), '']) {
            const res = await browser.post(action, { code });
            assert.equal(res.status, 401, code);
            const html = await res.text();
            assert.equal(alertOf(html), 'Wrong code. Enter the 6 digits your authenticator app shows now.');
            assert.ok(formAction(html, res.url, 'totp'), 'the form is shown again');
          }
          assert.equal(await sessionOf(browser, ownBase), null);
        });

        test('a client that insists on the MFA level (essential acr) and an account without a second factor: unmet_authentication_requirements', async () => {
          const browser = new WebClient();
          const claims = JSON.stringify({ id_token: { acr: { essential: true, values: [MFA] } } });
          const authorize = new URL(`${own.running.app.issuer}/auth`);
          authorize.search = new URLSearchParams({
            client_id: 'orders-mobile',
            response_type: 'code',
            redirect_uri: 'http://127.0.0.1/callback',
            scope: 'openid',
            state: 'essential',
            code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
            code_challenge_method: 'S256',
            claims,
          }).toString();
          let res = await settle(browser, await browser.get(authorize));
          res = await browser.post(formAction(await res.text(), res.url, 'login')!, {
            username: 'alice',
            password: 'alice',
          });
          for (let step = 0; step < 8 && location(res).host !== '127.0.0.1'; step++)
            res = await browser.get(location(res));
          const back = location(res);
          assert.equal(back.searchParams.get('error'), 'unmet_authentication_requirements');
          assert.equal(back.searchParams.get('state'), 'essential');
        });

        test('bob, signed in with his password alone, binds a first passkey only with the enrolment code issued to him: none, a wrong one, alice’s and a replaced one are refused (403), and that passkey cannot sign in', async () => {
          const stranger = await new WebClient().get(`${ownBase}/idp/account`);
          assert.equal(stranger.status, 401);
          assert.match(await stranger.text(), /href="http:\/\/localhost:\d+\/auth\/login\?returnTo=%2Fidp%2Faccount"/);

          const browser = await signedInWithPassword('bob', ownBase);
          const { html, csrf } = await accountPage(browser, ownBase);
          const secret = /data-testid="totp-secret">([A-Z2-7]+)</.exec(html)![1]!;
          const options = webauthnOptions<CreationOptions>(html);
          assert.equal(options.rp.id, new URL(ownBase).hostname);
          const refuse = async (form: Record<string, string>, origin: string, message: string) => {
            const res = await browser.post(`${ownBase}/idp/account/passkeys`, form, { origin });
            assert.equal(res.status, 403, message);
            assert.ok((await res.text()).includes(`<p>${message}</p>`), message);
          };
          await refuse({ csrf, response: '{}' }, 'http://evil.example', 'This form must be sent from this site.');
          await refuse(
            { csrf: 'forged', response: '{}' },
            ownRp,
            'This form is out of date or did not come from your account page. Open the page again.',
          );

          // The attack of issue 37: a stolen password registers the thief's passkey. Refused without bob's own code.
          const thief = new SoftAuthenticator(ownRp);
          const attempt = (enrolment?: string) =>
            browser.post(
              `${ownBase}/idp/account/passkeys`,
              { csrf, response: thief.register(options), ...(enrolment ? { enrolment_code: enrolment } : {}) },
              { origin: ownRp },
            );
          const bare = await attempt();
          assert.equal(bare.status, 403);
          assert.equal(refusalOf(await bare.text()), NO_CODE);
          // The page asks for the code.
          assert.match(
            html,
            /<p data-testid="enrolment-code-needed">Your first factor needs the enrolment code your administrator gives you\.<\/p>/,
          );
          assert.match(html, /<input id="enrolment-code-passkey" name="enrolment_code" type="text"/);
          const replaced = await enrolmentCode(ownBase, 'bob');
          const code = await enrolmentCode(ownBase, 'bob');
          for (const enrolment of ['AAAA-BBBB-CCCC-DDDD', await enrolmentCode(ownBase, 'alice'), replaced]) {
            const refused = await attempt(enrolment);
            assert.equal(refused.status, 403, enrolment);
            assert.equal(refusalOf(await refused.text()), NO_CODE);
          }
          const intruder = await passkeyStep('', undefined, ownBase);
          const signIn = await intruder.browser.post(intruder.action, { response: thief.assert(intruder.options) });
          assert.equal(signIn.status, 401);
          assert.equal(alertOf(await signIn.text()), 'This passkey is not registered for this account.');
          assert.match((await accountPage(browser, ownBase)).html, /data-testid="passkey-count">None yet\./);

          const res = await browser.post(
            `${ownBase}/idp/account/passkeys`,
            { csrf, response: firstBob.register(options), enrolment_code: code },
            { origin: ownRp },
          );
          const page = await res.text();
          assert.equal(res.status, 200, alertOf(page) ?? '');
          assert.match(page, /data-testid="message">The passkey is registered\./);
          assert.match(page, /data-testid="passkey-count">1 registered\./);
          // The page now asks him to verify first, and the forms of the page he had are refused.
          assert.match(
            page,
            /To add or replace a factor, first <a href="[^"]+acr_values=urn%3Aorders%3Aacr%3Amfa">verify with a second factor<\/a>/,
          );
          const totp = await browser.post(
            `${ownBase}/idp/account/totp`,
            { csrf, secret, code: await totpCode(secret) },
            { origin: ownRp },
          );
          assert.equal(totp.status, 403);
          assert.equal(refusalOf(await totp.text()), VERIFY_FIRST);
        });
      });

      test('enrolment codes are issued to the directory client alone, for a user who exists; anything else is refused clearly', async () => {
        const issue = (form: Record<string, string>, headers: Record<string, string> = {}) =>
          new WebClient().post(`${base}/idp/enrolment-codes`, form, headers);
        const basic = (id: string, secret: string) => ({
          authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`,
        });
        const directory = basic('directory', 'directory-secret');
        const ok = await issue({ username: ' Bob ' }, directory);
        assert.equal(ok.status, 201);
        assert.equal(ok.headers.get('cache-control'), 'no-store');
        const body = (await ok.json()) as { username: string; code: string; expiresAt: string };
        assert.equal(body.username, 'bob');
        assert.match(body.code, /^[A-Z2-9]{4}(-[A-Z2-9]{4}){3}$/);
        // A day from now, by the server's clock within a minute of this one.
        assert.ok(Math.abs(Date.parse(body.expiresAt) - Date.now() - 86_400_000) < 60_000, body.expiresAt);
        const refusals: [Record<string, string>, Record<string, string>, number, object][] = [
          [
            { username: 'bob' },
            {},
            401,
            { error: 'invalid_client', error_description: 'authenticate as the directory client (HTTP Basic)' },
          ],
          [
            { username: 'bob' },
            basic('directory', 'wrong'),
            401,
            { error: 'invalid_client', error_description: 'authenticate as the directory client (HTTP Basic)' },
          ],
          [
            { username: 'bob' },
            basic('orders-web', 'orders-web-secret'),
            401,
            { error: 'invalid_client', error_description: 'authenticate as the directory client (HTTP Basic)' },
          ],
          [
            {},
            directory,
            400,
            { error: 'invalid_request', error_description: 'username is required: the user name the code is for' },
          ],
          [
            { username: 'mallory' },
            directory,
            404,
            { error: 'unknown_user', error_description: 'no user has this user name' },
          ],
          [
            { username: 'bob', a: '1', b: '2' },
            directory,
            413,
            { error: 'invalid_request', error_description: 'the form is larger than one username' },
          ],
        ];
        for (const [form, headers, status, answer] of refusals) {
          const res = await issue(form, headers);
          assert.equal(res.status, status, JSON.stringify([form, headers]));
          assert.deepEqual(await res.json(), answer);
          if (status === 401) assert.equal(res.headers.get('www-authenticate'), 'Basic realm="orders-idp"');
        }
        const get = await new WebClient().get(`${base}/idp/enrolment-codes`, directory);
        assert.equal(get.status, 405);
        assert.equal(get.headers.get('allow'), 'POST');
        assert.deepEqual(await get.json(), {
          error: 'invalid_request',
          error_description: 'enrolment codes are issued with POST',
        });
      });

      test('he signs in with it alone (user verified): acr MFA, amr hwk user mfa', async () => {
        const { browser, action, options } = await passkeyStep();
        assert.deepEqual(options.rpId, new URL(base).hostname);
        const done = await settle(browser, await browser.post(action, { response: bob.assert(options) }));
        assert.equal(done.status, 200);
        const session = await sessionOf(browser);
        assert.equal(session?.sub, 'bob');
        assert.equal(session?.acr, MFA);
        assert.deepEqual(session?.amr, ['hwk', 'user', 'mfa']);
      });

      test('and as the second factor after his password: amr pwd hwk user mfa', async () => {
        const { browser, action, options } = await passkeyStep(`?acr_values=${MFA}`, 'bob');
        const done = await settle(browser, await browser.post(action, { response: bob.assert(options) }));
        assert.equal(done.status, 200);
        assert.deepEqual((await sessionOf(browser))?.amr, ['pwd', 'hwk', 'user', 'mfa']);
      });

      test.each([
        [
          'the wrong origin',
          { origin: 'http://evil.example:4000' },
          /^The passkey answer could not be verified: Unexpected authentication response origin/,
        ],
        [
          'the wrong RP ID',
          { rpId: 'evil.example' },
          /^The passkey answer could not be verified: Unexpected RP ID hash/,
        ],
        [
          'a counter going backwards',
          { counter: 1 },
          /^The passkey answer could not be verified: Response counter value 1 was lower than expected/,
        ],
        [
          'no user verification, alone',
          { userVerified: false },
          /^The passkey answer could not be verified: User verification required/,
        ],
        [
          'another challenge',
          { challenge: 'bm90LWEtY2hhbGxlbmdl' },
          /^This passkey answer is for a challenge that has expired or was already used\.$/,
        ],
      ])('an assertion with %s is refused (401, the reason on the page, no session)', async (_name, bent, reason) => {
        const { browser, action, options } = await passkeyStep();
        const res = await browser.post(action, { response: bob.assert(options, bent) });
        assert.equal(res.status, 401);
        const html = await res.text();
        assert.match(alertOf(html)!, reason);
        assert.ok(formAction(html, res.url, 'passkey'), 'the passkey page again');
        assert.match(html, /<h1>Sign in with a passkey<\/h1>/);
        assert.equal(await sessionOf(browser), null);
      });

      test('a replayed challenge: the assertion that signed bob in, sent again, is refused; so is one for another sign-in', async () => {
        const first = await passkeyStep();
        const answer = bob.assert(first.options);
        await settle(first.browser, await first.browser.post(first.action, { response: answer }));
        assert.equal((await sessionOf(first.browser))?.sub, 'bob');

        const again = await passkeyStep();
        const replayed = await again.browser.post(again.action, { response: answer });
        assert.equal(replayed.status, 401);
        assert.equal(
          alertOf(await replayed.text()),
          'This passkey answer is for a challenge that has expired or was already used.',
        );

        // An answer to this sign-in's own challenge, posted to another sign-in.
        const other = await passkeyStep();
        const crossed = await other.browser.post(other.action, { response: bob.assert(again.options) });
        assert.equal(crossed.status, 401);
        assert.equal(alertOf(await crossed.text()), 'This passkey answer belongs to another sign-in.');
      });

      test('malformed and unknown answers are refused clearly', async () => {
        const stranger = new SoftAuthenticator(rp);
        for (const [response, status, reason] of [
          ['{', 401, 'The passkey answer is not JSON.'],
          ['{"id":"x"}', 401, 'The passkey answer is not a WebAuthn credential (rawId).'],
          ['', 400, 'The passkey sent no answer (passkeys need JavaScript in the browser).'],
        ] as const) {
          const { browser, action } = await passkeyStep();
          const res = await browser.post(action, { response });
          assert.equal(res.status, status, response);
          assert.equal(alertOf(await res.text()), reason);
        }
        const { browser, action, options } = await passkeyStep();
        const res = await browser.post(action, { response: stranger.assert(options) });
        assert.equal(res.status, 401);
        assert.equal(alertOf(await res.text()), 'This passkey is not registered for this account.');
      });

      test('an oversized attestation is refused unread (413): past the size of any answer, and past the body limit', async () => {
        // Bob signs in with his passkey, so the account page lets him add another.
        const { browser, action, options } = await passkeyStep();
        await settle(browser, await browser.post(action, { response: bob.assert(options) }));
        const { html, csrf } = await accountPage(browser);
        const creation = webauthnOptions<CreationOptions>(html);
        const mallory = new SoftAuthenticator(rp);
        for (const [padding, reason] of [
          [8 * 1024, /role="alert">The passkey answer is larger than any passkey sends\.</],
          [100 * 1024, /The form sent more than adding a factor ever needs, so it was not read\./],
        ] as const) {
          const res = await browser.post(
            `${base}/idp/account/passkeys`,
            { csrf, response: mallory.register(creation, { padding }) },
            { origin: rp },
          );
          assert.equal(res.status, 413, String(padding));
          assert.match(await res.text(), reason);
        }
        assert.match((await accountPage(browser)).html, /data-testid="passkey-count">1 registered\./);
      });

      test(`${SIGNIN_LIMITS.user.lockAfter} wrong codes lock bob’s authenticator app (429, even for the right code); alice, carol and bob’s other factors still sign in`, async () => {
        // Bob adds an authenticator app from a session that used his passkey.
        const step = await passkeyStep();
        await settle(step.browser, await step.browser.post(step.action, { response: bob.assert(step.options) }));
        const { html, csrf } = await accountPage(step.browser);
        const secret = /data-testid="totp-secret">([A-Z2-7]+)</.exec(html)![1]!;
        const on = await step.browser.post(
          `${base}/idp/account/totp`,
          { csrf, secret, code: await totpCode(secret) },
          { origin: rp },
        );
        assert.equal(on.status, 200);

        const { browser, action } = await atTotpStep('bob');
        for (let attempt = 1; attempt <= SIGNIN_LIMITS.user.lockAfter; attempt++) {
          const res = await browser.post(action, { code: '000000' });
          assert.equal(res.status, 401, `attempt ${attempt}`);
        }
        const locked = await browser.post(action, { code: await totpCode(secret, 1) });
        assert.equal(locked.status, 429);
        assert.match(locked.headers.get('retry-after')!, /^\d+$/);
        assert.match(alertOf(await locked.text())!, /^Too many wrong codes\. Try again in \d+ (seconds|minutes)\.$/);

        for (const user of ['alice', 'bob', 'carol']) await signedInWithPassword(user);
        const alone = await passkeyStep();
        await settle(alone.browser, await alone.browser.post(alone.action, { response: bob.assert(alone.options) }));
        assert.equal((await sessionOf(alone.browser))?.acr, MFA);
      });
    });
    describe('two replicas of their own: changing factors needs a recent sign-in (STEP_UP_MAX_AGE_S), and second factors have their own throttle', () => {
      /**
       * Two replicas over one database of their own (the same IdP sessions and keys), whose throttles have counted no
       * other test's failures from this address: STEP_UP_MAX_AGE_S is 1 on one, the default 900 on the other.
       */
      let strict: TestServer;
      let lenient: TestServer;
      let strictBase: string;
      let lenientBase: string;

      beforeAll(async () => {
        strict = await startTestServer({ STEP_UP_MAX_AGE_S: '1' }, { replicated: true });
        lenient = await startTestServer({}, { sameDatabaseAs: strict });
        strictBase = strict.running.publicUrl;
        lenientBase = lenient.running.publicUrl;
      });
      afterAll(async () => {
        await lenient?.close();
        await strict?.close();
      });

      test('one MFA session over a second old adding a passkey: the 1 s replica refuses (401, sign in again, with the password too), the 900 s one accepts', async () => {
        const browser = new WebClient();
        const page = await password(browser, await startAt(browser, `?acr_values=${MFA}`, lenientBase), 'carol');
        assert.equal((await settle(browser, await answerTotp(browser, page, CAROL))).status, 200);
        const session = (await sessionOf(browser, lenientBase))!;
        assert.equal(session.acr, MFA);
        const { html, csrf } = await accountPage(browser, lenientBase);
        const options = webauthnOptions<CreationOptions>(html);
        // The same new passkey, as the browser would answer on each replica's page (the origin is part of the answer).
        const [lenientOrigin, strictOrigin] = [new URL(lenientBase).origin, new URL(strictBase).origin];
        const passkey = new SoftAuthenticator(strictOrigin);
        const forStrict = passkey.register(options);
        const forLenient = passkey.register(options, { origin: lenientOrigin });
        // Until the server's clock, which wrote auth_time in whole seconds, is 2 s past it: over 1 s old however rounded.
        const olderThanOneSecond = Date.parse(session.authTime!) + 2000;
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, olderThanOneSecond - Date.now()) + 50));

        const stale = await browser.post(
          `${strictBase}/idp/account/passkeys`,
          { csrf, response: forStrict },
          { origin: strictOrigin },
        );
        assert.equal(stale.status, 401);
        const refusal = await stale.text();
        assert.equal(
          refusalOf(refusal),
          'Changing your factors needs a sign-in within the last 1 seconds. Sign in again first.',
        );
        const again = /<a href="([^"]+)">Sign in again<\/a>/.exec(refusal)?.[1]?.replace(/&amp;/g, '&');
        assert.equal(
          again,
          `${strictBase}/auth/login?returnTo=%2Fidp%2Faccount&acr_values=urn%3Aorders%3Aacr%3Amfa&max_age=0`,
        );
        // The page there offers no form, only that way, which asks for the password again, not just the second factor.
        const strictPage = await accountPage(browser, strictBase);
        assert.equal(strictPage.res.status, 200);
        assert.equal(strictPage.csrf, '');
        assert.match(
          strictPage.html,
          /To add or replace a factor, first <a href="[^"]+&amp;max_age=0">sign in again<\/a>: changing factors needs a sign-in within the last 1 seconds\./,
        );
        const signInAgain = await settle(browser, await browser.get(again!));
        assert.match(await signInAgain.text(), /<input[^>]+name="password"/);

        const fresh = await browser.post(
          `${lenientBase}/idp/account/passkeys`,
          { csrf, response: forLenient },
          { origin: lenientOrigin },
        );
        const accepted = await fresh.text();
        assert.equal(fresh.status, 200, alertOf(accepted) ?? '');
        assert.match(accepted, /data-testid="message">The passkey is registered\./);
      });

      test(`${SIGNIN_LIMITS.user.lockAfter} failed password sign-ins as the user name “second-factor:carol” lock that name, not carol’s authenticator app`, async () => {
        const signIn = new WebClient();
        const login = formAction(await (await startAt(signIn, '', strictBase)).text(), strictBase, 'login')!;
        const attempt = () => signIn.post(login, { username: 'second-factor:carol', password: 'guess' });
        for (let i = 1; i <= SIGNIN_LIMITS.user.lockAfter; i++)
          assert.equal((await attempt()).status, 401, `attempt ${i}`);
        assert.equal((await attempt()).status, 429);
        // Her codes are still checked: a wrong one is only wrong, with no Retry-After.
        const { browser, action } = await atTotpStep('carol', strictBase);
        const res = await browser.post(action, { code: '000000' });
        assert.equal(res.status, 401);
        assert.equal(res.headers.get('retry-after'), null);
        assert.equal(alertOf(await res.text()), 'Wrong code. Enter the 6 digits your authenticator app shows now.');
      });
    });
  });
});

// ─── was __tests__/integration/login-attempts-bounded.test.ts ───
describe('login-attempts-bounded', () => {
  const CAP = 5;
  /** A sign-in start costs 10 points: 700 points a window are 70 starts per address. */
  const POINTS = 700;
  const STARTS = 70;

  describe('sign-in attempts an anonymous caller can make the server store', () => {
    let server: TestServer;
    beforeAll(async () => {
      // Behind one proxy hop the client address is the X-Forwarded-For entry the proxy added.
      server = await startTestServer({
        LOGIN_ATTEMPTS_PER_IP: String(CAP),
        TRUST_PROXY: '1',
        RATE_LIMIT_POINTS: String(POINTS),
        RATE_LIMIT_WINDOW_S: '3600',
      });
    });
    afterAll(() => server?.close());

    const rows = async (ip?: string) =>
      (
        await server.running.app.db.query<{ n: number }>(
          `select count(*)::int as n from auth_login_attempts where $1::text is null or client_ip = $1`,
          [ip ?? null],
        )
      )[0]!.n;
    const attemptIds = async (ip: string) =>
      (
        await server.running.app.db.query<{ id_hash: string }>(
          'select id_hash from auth_login_attempts where client_ip = $1 order by id_hash',
          [ip],
        )
      ).map((r) => r.id_hash);

    const start = (ip: string, accept?: string) => {
      const req = request(server.running.publicUrl).get('/auth/login?returnTo=/').set('x-forwarded-for', ip);
      return accept ? req.set('accept', accept) : req;
    };
    /** How many answers had each status. */
    const tally = (answers: { status: number }[]) =>
      answers.reduce<Record<number, number>>((t, a) => ({ ...t, [a.status]: (t[a.status] ?? 0) + 1 }), {});
    const concurrently = (n: number, ip: string) => Promise.all(Array.from({ length: n }, () => start(ip)));

    test('a flood of GET /auth/login from one address keeps at most LOGIN_ATTEMPTS_PER_IP rows for it', async () => {
      for (let i = 0; i < 60; i++) {
        await request(server.running.publicUrl).get('/auth/login').set('x-forwarded-for', '203.0.113.7').expect(302);
      }
      assert.equal(await rows('203.0.113.7'), CAP);
    });

    test('a flood from one address does not touch the sign-ins of another', async () => {
      const browser = new WebClient();
      const authorizationUrl = await startLogin(browser, server.running.publicUrl);
      for (let i = 0; i < 3 * CAP; i++) {
        await request(server.running.publicUrl).get('/auth/login').set('x-forwarded-for', '198.51.100.9').expect(302);
      }
      const callback = await signInAtIdp(browser, authorizationUrl, 'alice');
      assert.equal((await browser.get(callback)).status, 303, 'the earlier sign-in from 127.0.0.1 still completes');
      assert.equal(await rows('198.51.100.9'), CAP);
      const [seen] = await server.running.app.db.query<{ n: number }>(
        'select count(distinct client_ip)::int as n from auth_login_attempts',
      );
      // Other tests of this block may have flooded other addresses before: the bound is per address.
      assert.ok((await rows()) <= seen!.n * CAP, 'storage stays bounded by addresses × LOGIN_ATTEMPTS_PER_IP');
    });

    test('the newest attempt of a flooded address still signs in', async () => {
      const browser = new WebClient();
      const started = await browser.get(`${server.running.publicUrl}/auth/login`, { 'x-forwarded-for': '203.0.113.7' });
      assert.equal(started.status, 302);
      const callback = await signInAtIdp(browser, location(started), 'bob');
      assert.equal((await browser.get(callback)).status, 303);
    });

    /**
     * Sends `n` starts from one address at once. On PostgreSQL the address first holds 100 rows past its bound (as after
     * LOGIN_ATTEMPTS_PER_IP is lowered), so each trim has many to delete, and the test deletes the oldest, as a callback
     * would, in a transaction it holds open: trims that wait for that row pile up, and all go on at once when the test
     * commits, once every start has answered or every connection of the server's pool waits, however loaded the machine.
     */
    async function allAtOnce(n: number, ip: string) {
      if (!process.env.DATABASE_URL) return concurrently(n, ip);
      await server.running.app.db.query(
        `insert into auth_login_attempts (id_hash, state, nonce, code_verifier, return_to, client_ip, created_at, expires_at)
       select $1 || '-' || i, 's', 'n', 'v', '/', $1, now() - make_interval(secs => i), now() + interval '10 minutes'
       from generate_series(1, 100) i`,
        [ip],
      );
      const locker = new pg.Client({
        connectionString: process.env.DATABASE_URL,
        options: `-c search_path="${server.schema!}"`,
      });
      await locker.connect();
      try {
        await locker.query('begin');
        await locker.query(
          `delete from auth_login_attempts
         where id_hash = (select id_hash from auth_login_attempts where client_ip = $1 order by created_at limit 1)`,
          [ip],
        );
        let answered = 0;
        const answers = Promise.all(Array.from({ length: n }, () => start(ip).then((res) => (answered++, res))));
        const waiting = async () => {
          // Within a transaction pg_stat_activity is read once, unless its snapshot is cleared.
          await locker.query('select pg_stat_clear_snapshot()');
          const { rows } = await locker.query<{ n: number }>(
            `with recursive behind(pid) as (
             select pid from pg_stat_activity where pg_backend_pid() = any(pg_blocking_pids(pid))
             union
             select a.pid from pg_stat_activity a join behind b on b.pid = any(pg_blocking_pids(a.pid))
           )
           select count(*)::int as n from behind`,
          );
          return rows[0]!.n;
        };
        while (answered < n && (await waiting()) < POOL_SIZE) await setImmediate();
        await locker.query('commit');
        return await answers;
      } finally {
        await locker.end();
      }
    }

    test('50 concurrent sign-in starts from one address all redirect, and it keeps LOGIN_ATTEMPTS_PER_IP rows', async () => {
      // Each start inserts a row and trims the address's oldest: on PostgreSQL, concurrent trims of one address used to
      // deadlock, answering 500. Three rounds, each from an address of its own, within its budget.
      const ips = ['192.0.2.50', '192.0.2.51', '192.0.2.52'];
      const answers = [];
      for (const ip of ips) answers.push(tally(await allAtOnce(50, ip)));
      assert.deepEqual(answers, [{ 302: 50 }, { 302: 50 }, { 302: 50 }]);
      for (const ip of ips) assert.equal(await rows(ip), CAP, ip);
    });

    test('starts spend their address budget: the last one allowed redirects, the first one past it is 429', async () => {
      const ip = '192.0.2.70';
      assert.deepEqual(tally(await concurrently(STARTS - 1, ip)), { 302: STARTS - 1 });

      const last = await start(ip);
      assert.equal(last.status, 302);
      assert.equal(last.headers['ratelimit-policy'], `"orders";q=${POINTS};w=3600`);
      assert.match(last.headers.ratelimit!, /^"orders";r=0;t=\d+$/);
      assert.equal(last.headers['retry-after'], undefined);
      const kept = await attemptIds(ip);

      const refused = await start(ip);
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(refused.headers['cache-control'], 'no-store');
      assert.equal(refused.headers['set-cookie'], undefined, 'no login cookie');
      const reset = Number(refused.headers['retry-after']);
      assert.ok(
        Number.isInteger(reset) && reset >= 1 && reset <= 3600,
        `Retry-After ${refused.headers['retry-after']}`,
      );
      assert.equal(refused.headers.ratelimit, `"orders";r=0;t=${reset}`);
      assert.equal(refused.headers['ratelimit-policy'], `"orders";q=${POINTS};w=3600`);
      assert.match(refused.text, /<h1>Too many sign-ins<\/h1>/);
      assert.match(refused.text, new RegExp(`retry in ${reset} seconds`));
      assert.deepEqual(await attemptIds(ip), kept, 'a refused start stores nothing');

      // A client that asks for JSON gets the API's problem, with the same headers.
      const problem = await start(ip, 'application/problem+json');
      assert.equal(problem.status, 429);
      assert.equal(problem.headers['content-type'], 'application/problem+json; charset=utf-8');
      // The window runs on between the two answers: a second may have passed.
      const later = Number(problem.headers['retry-after']);
      assert.ok(later === reset || later === reset - 1, `Retry-After ${later} after ${reset}`);
      assert.deepEqual(JSON.parse(problem.text) as Problem, {
        type: '/problems/rate-limited',
        title: 'Rate limit exceeded',
        status: 429,
        detail: `Too many sign-ins were started from this address; retry in ${later} seconds.`,
        instance: '/auth/login',
        code: 'RATE_LIMITED',
      });

      // The budget is the address's: another address still starts.
      assert.equal((await start('192.0.2.71')).status, 302);
    });

    test('80 concurrent starts from one address: exactly the budget is admitted, the rest are 429, none fails', async () => {
      const ip = '192.0.2.80';
      assert.deepEqual(tally(await concurrently(80, ip)), { 302: STARTS, 429: 80 - STARTS });
      assert.equal(await rows(ip), CAP);
    });
  });
});

// ─── was __tests__/integration/step-up.test.ts ───
describe('step-up', () => {
  const MFA = 'urn:orders:acr:mfa';
  const WEAKER =
    'Staff changes need a sign-in with a second factor; sign in again with acr_values and max_age as given.';
  const challenge = (description: string, maxAge = 900) =>
    `Bearer realm="orders-api", error="insufficient_user_authentication", error_description="${description}", acr_values="${MFA}", max_age=${maxAge}`;
  const SET_STATUS =
    'mutation($id: ID!, $status: String!) { updateOrderStatus(id: $id, status: $status) { id status } }';

  interface Order {
    id: string;
    status: string;
    customer_id: string;
  }

  describe('staff changes need a recent second factor (RFC 9470 step-up)', () => {
    let server: TestServer;
    let alice: string;
    let carolPassword: string;
    let carolMfa: string;

    beforeAll(async () => {
      server = await sharedServer();
      [alice, carolPassword, carolMfa] = await Promise.all([
        server.token('alice'),
        server.token('carol', { mfa: false }),
        server.token('carol'),
      ]);
    });

    const call = (method: string, path: string, opts: Parameters<typeof rest>[3] = {}, url = server.url) =>
      rest(url, method, path, opts);
    const place = async (token = alice) => {
      const res = await call('POST', '/orders', {
        token,
        body: { items: [{ sku: 'KB-001', qty: 1 }] },
        headers: { 'idempotency-key': randomUUID() },
      });
      assert.equal(res.status, 201, res.text);
      return { order: res.json<Order>(), etag: res.headers.get('etag')! };
    };
    const patch = (id: string, etag: string, token: string, status = 'paid', url = server.url) =>
      call(
        'PATCH',
        `/orders/${id}`,
        {
          token,
          body: { status },
          headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag },
        },
        url,
      );
    const assertStepUpProblem = (res: RestResponse, instance: string, detail = WEAKER, maxAge = 900) => {
      assert.equal(res.status, 401, res.text);
      assert.equal(res.headers.get('www-authenticate'), challenge(detail, maxAge));
      assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
      assert.deepEqual(res.json(), {
        type: '/problems/insufficient-user-authentication',
        title: 'Stronger sign-in required',
        status: 401,
        detail,
        instance,
        code: 'INSUFFICIENT_USER_AUTHENTICATION',
        acrValues: MFA,
        maxAge,
      });
    };

    test('tokens say how the user signed in: acr, amr (RFC 8176) and auth_time', () => {
      const password = decodeJwt(carolPassword);
      const mfa = decodeJwt(carolMfa);
      assert.equal(password.acr, 'urn:orders:acr:pwd');
      assert.deepEqual(password.amr, ['pwd']);
      assert.equal(mfa.acr, MFA);
      assert.deepEqual(mfa.amr, ['pwd', 'otp', 'mfa']);
      for (const claims of [password, mfa]) {
        assert.equal(typeof claims.auth_time, 'number');
        assert.ok(Math.abs((claims.auth_time as number) - Date.now() / 1000) < 120);
      }
      assert.equal(decodeJwt(alice).acr, 'urn:orders:acr:pwd');
    });

    test("carol with a password-only token: REST PATCH of alice's order is 401 insufficient_user_authentication, and nothing changes", async () => {
      const { order, etag } = await place();
      assertStepUpProblem(await patch(order.id, etag, carolPassword), `/v1/orders/${order.id}`);
      const after = await call('GET', `/orders/${order.id}`, { token: alice });
      assert.equal(after.json<Order>().status, 'pending');
      assert.equal(after.headers.get('etag'), etag);
    });

    test('every other staff change is refused the same way; reads work as before', async () => {
      const { order, etag } = await place();
      const path = `/orders/${order.id}`;
      assertStepUpProblem(
        await call('DELETE', path, { token: carolPassword, headers: { 'if-match': etag } }),
        `/v1${path}`,
      );
      assertStepUpProblem(
        await call('PUT', path, {
          token: carolPassword,
          body: { items: [{ sku: 'KB-001', qty: 2 }] },
          headers: { 'if-match': etag },
        }),
        `/v1${path}`,
      );
      assertStepUpProblem(
        await call('POST', '/orders', {
          token: carolPassword,
          body: { customer_id: order.customer_id, items: [{ sku: 'KB-001', qty: 1 }] },
          headers: { 'idempotency-key': randomUUID() },
        }),
        '/v1/orders',
      );
      const cancel = await server.gql(
        'mutation($id: ID!) { cancelOrder(id: $id) { status } }',
        { id: order.id },
        {
          token: carolPassword,
        },
      );
      assert.equal(cancel.body.errors?.[0]?.extensions?.code, 'INSUFFICIENT_USER_AUTHENTICATION');

      const read = await call('GET', path, { token: carolPassword });
      assert.equal(read.status, 200);
      assert.equal(read.json<Order>().status, 'pending');
      assert.equal((await call('GET', '/orders', { token: carolPassword })).status, 200);
      const list = await server.gql('{ recentOrders(first: 5) { id status } }', undefined, { token: carolPassword });
      assert.equal(list.status, 200);
      assert.equal(list.body.errors, undefined);
      assert.ok((list.body.data!.recentOrders as unknown[]).length > 0);
    });

    test('customers need no second factor for their own orders: alice cancels her pending order, carol her own', async () => {
      const mine = await place();
      const cancelled = await patch(mine.order.id, mine.etag, alice, 'cancelled');
      assert.equal(cancelled.status, 200, cancelled.text);
      assert.equal(cancelled.json<Order>().status, 'cancelled');

      const carols = await place(carolPassword);
      const own = await patch(carols.order.id, carols.etag, carolPassword, 'cancelled');
      assert.equal(own.status, 200, own.text);
      // Moving her own order on is the staff role's power, not a customer's: that needs the second factor.
      const next = await place(carolPassword);
      assertStepUpProblem(await patch(next.order.id, next.etag, carolPassword, 'paid'), `/v1/orders/${next.order.id}`);
    });

    test.each(['post', 'ws', 'sse'] as Transport[])(
      'GraphQL over %s: updateOrderStatus is refused with INSUFFICIENT_USER_AUTHENTICATION, acrValues and maxAge, then succeeds with --mfa',
      async (transport) => {
        const { order } = await place();
        const operation = { query: SET_STATUS, variables: { id: order.id, status: 'paid' } };
        const refused = await sendOver(server.url, transport, operation, carolPassword);
        assert.deepEqual(refused.body.data, { updateOrderStatus: null });
        assert.deepEqual(refused.body.errors, [
          {
            message: WEAKER,
            locations: [{ line: 1, column: 40 }],
            path: ['updateOrderStatus'],
            extensions: { code: 'INSUFFICIENT_USER_AUTHENTICATION', acrValues: MFA, maxAge: 900 },
          },
        ]);
        const done = await sendOver(server.url, transport, operation, carolMfa);
        assert.equal(done.body.errors, undefined);
        assert.deepEqual(done.body.data, { updateOrderStatus: { id: order.id, status: 'paid' } });
      },
    );

    test('with --mfa the same REST writes succeed', async () => {
      const { order, etag } = await place();
      const paid = await patch(order.id, etag, carolMfa);
      assert.equal(paid.status, 200, paid.text);
      assert.equal(paid.json<Order>().status, 'paid');
      const forAlice = await call('POST', '/orders', {
        token: carolMfa,
        body: { customer_id: order.customer_id, items: [{ sku: 'KB-001', qty: 1 }] },
        headers: { 'idempotency-key': randomUUID() },
      });
      assert.equal(forAlice.status, 201, forAlice.text);
      const removed = await call('DELETE', `/orders/${forAlice.json<Order>().id}`, { token: carolMfa });
      assert.equal(removed.status, 204);
    });

    test('16 concurrent password-only PATCHes are all refused; 16 with --mfa and one If-Match: one 200, fifteen 412', async () => {
      const { order, etag } = await place();
      const refused = await Promise.all(Array.from({ length: 16 }, () => patch(order.id, etag, carolPassword)));
      assert.deepEqual(
        refused.map((r) => r.status),
        Array(16).fill(401),
      );
      const raced = await Promise.all(Array.from({ length: 16 }, () => patch(order.id, etag, carolMfa)));
      assert.deepEqual(raced.map((r) => r.status).sort(), [200, ...Array(15).fill(412)]);
    });

    test('an auth_time past max_age is refused again; STEP_UP_ACR=off turns the rule off', async () => {
      const issuer = server.running.app.issuer;
      const short = await startTestServer({ OIDC_ISSUER: issuer, STEP_UP_MAX_AGE_S: '1' }, { sameDatabaseAs: server });
      const off = await startTestServer({ OIDC_ISSUER: issuer, STEP_UP_ACR: 'off' }, { sameDatabaseAs: server });
      try {
        const { order, etag } = await place();
        // Past the second after auth_time, whatever this machine's load: the token itself says when.
        const deadline = (decodeJwt(carolMfa).auth_time as number) * 1000 + 1000;
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now()) + 50));
        const stale = await patch(order.id, etag, carolMfa, 'paid', short.url);
        assertStepUpProblem(
          stale,
          `/v1/orders/${order.id}`,
          'Staff changes need a sign-in within the last 1 seconds; sign in again with a second factor.',
          1,
        );
        // The same token is recent enough for the 900 seconds of the first replica.
        const paid = await patch(order.id, etag, carolMfa);
        assert.equal(paid.status, 200, paid.text);

        const next = await place();
        const relaxed = await patch(next.order.id, next.etag, carolPassword, 'paid', off.url);
        assert.equal(relaxed.status, 200, relaxed.text);
      } finally {
        await off.close();
        await short.close();
      }
    });

    test('a browser session carries its ID token level; /auth/login?acr_values=…&max_age=… asks only for the second factor, and the stepped-up session may change orders', async () => {
      const base = server.running.publicUrl;
      const browser = new WebClient();
      const { response } = await signIn(browser, base, 'carol');
      assert.equal(response.status, 303);
      const before = (await (await browser.get(`${base}/auth/session`)).json()) as Record<string, unknown>;
      assert.equal(before.acr, 'urn:orders:acr:pwd');
      assert.deepEqual(before.amr, ['pwd']);
      assert.equal(typeof before.authTime, 'string');

      const { order } = await place();
      const refused = await browser.graphql(
        base,
        `mutation { updateOrderStatus(id: "${order.id}", status: "paid") { status } }`,
      );
      assert.equal(refused.body.errors?.[0]?.extensions.code, 'INSUFFICIENT_USER_AUTHENTICATION');

      const home = await (await browser.get(`${base}/`, { accept: 'text/html' })).text();
      assert.match(
        home,
        /<dd data-testid="level">password <small>\(<code>urn:orders:acr:pwd<\/code> · <code>pwd<\/code>\)<\/small><\/dd>/,
      );
      const offer = /<a href="([^"]+)">Verify with a second factor<\/a>/.exec(home)?.[1]?.replace(/&amp;/g, '&');
      assert.equal(offer, '/auth/login?acr_values=urn%3Aorders%3Aacr%3Amfa&max_age=900');

      const start = await browser.get(`${base}${offer}`);
      assert.equal(start.status, 302);
      const authorize = location(start);
      assert.equal(authorize.searchParams.get('acr_values'), MFA);
      assert.equal(authorize.searchParams.get('max_age'), '900');
      const page = await follow(browser, await browser.get(authorize), '/auth/callback');
      assert.ok(page instanceof Response);
      const html = await page.clone().text();
      // The IdP session is a minute old, within max_age: the password is not asked again.
      assert.doesNotMatch(html, /name="password"/);
      assert.match(html, /asks for a second factor for <strong data-testid="account">Carol Clark<\/strong>/);
      const callback = await follow(
        browser,
        await answerTotp(browser, page, DEMO_TOTP_SECRETS.carol!),
        '/auth/callback',
      );
      assert.ok(callback instanceof URL);
      assert.equal((await browser.get(callback)).status, 303);

      const after = (await (await browser.get(`${base}/auth/session`)).json()) as Record<string, unknown>;
      assert.equal(after.acr, MFA);
      assert.deepEqual(after.amr, ['pwd', 'otp', 'mfa']);
      const paid = await browser.graphql(
        base,
        `mutation { updateOrderStatus(id: "${order.id}", status: "paid") { status } }`,
      );
      assert.equal(paid.body.errors, undefined);
      assert.deepEqual(paid.body.data, { updateOrderStatus: { status: 'paid' } });
      const steppedUp = await (await browser.get(`${base}/`, { accept: 'text/html' })).text();
      assert.match(steppedUp, /data-testid="level">second factor/);
      assert.doesNotMatch(steppedUp, /Verify with a second factor/);
    });

    test('asking for the MFA level for an account without a second factor signs in at the password level, without a loop or a page', async () => {
      const base = server.running.publicUrl;
      const browser = new WebClient();
      assert.equal((await signIn(browser, base, 'alice')).response.status, 303);
      const start = await browser.get(`${base}/auth/login?acr_values=${MFA}`);
      // The IdP's session is reused: straight back to the callback, with what alice has.
      const callback = await follow(browser, await browser.get(location(start)), '/auth/callback');
      assert.ok(callback instanceof URL, 'no page was shown');
      assert.equal((await browser.get(callback)).status, 303);
      const session = (await (await browser.get(`${base}/auth/session`)).json()) as Record<string, unknown>;
      assert.equal(session.acr, 'urn:orders:acr:pwd');
      assert.deepEqual(session.amr, ['pwd']);
    });

    test('/auth/login refuses malformed acr_values and max_age with a clear page', async () => {
      const base = server.running.publicUrl;
      for (const query of ['acr_values=%22quoted%22', 'max_age=-1', 'max_age=86401', `acr_values=${'a '.repeat(11)}`]) {
        const res = await new WebClient().get(`${base}/auth/login?${query}`);
        assert.equal(res.status, 400, query);
        assert.match(await res.text(), /acr_values must be up to 10 space-separated values and max_age whole seconds/);
      }
    });
  });

  describe('an external issuer’s acr and amr are honoured the same way', () => {
    let issuer: SwitchableIssuer;
    let app: TestServer;
    const warnings: { event?: unknown; msg: string }[] = [];

    beforeAll(async () => {
      issuer = await startSwitchableIssuer();
      app = await startTestServer(
        { OIDC_ISSUER: issuer.url, OIDC_CLIENT_ID: 'orders-web', OIDC_CLIENT_SECRET: 'orders-web-secret' },
        { onLog: (entry) => warnings.push(entry) },
      );
      await app.running.app.acrSupportChecked;
    });
    afterAll(async () => {
      await app?.close();
      await issuer?.close();
    });

    const token = async (user: string, mfa: boolean) =>
      (await loginWithPkce({ issuer: issuer.url, username: user, password: user, ...mfaLogin(user, mfa) })).accessToken;

    test("carol's password-only token from the external issuer is refused a staff change; her MFA token is not", async () => {
      const alice = await token('alice', false);
      const created = await rest(app.url, 'POST', '/orders', {
        token: alice,
        body: { items: [{ sku: 'KB-001', qty: 1 }] },
        headers: { 'idempotency-key': randomUUID() },
      });
      assert.equal(created.status, 201, created.text);
      const { id } = created.json<Order>();
      const etag = created.headers.get('etag')!;
      const patchWith = (t: string) =>
        rest(app.url, 'PATCH', `/orders/${id}`, {
          token: t,
          body: { status: 'paid' },
          headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag },
        });
      const refused = await patchWith(await token('carol', false));
      assert.equal(refused.status, 401);
      assert.equal(refused.headers.get('www-authenticate'), challenge(WEAKER));
      const paid = await patchWith(await token('carol', true));
      assert.equal(paid.status, 200, paid.text);
    });

    test('at start, the issuer’s metadata was read: it lists the MFA level, so nothing is logged', () => {
      assert.deepEqual(
        warnings.filter((w) => String(w.event).startsWith('auth.step_up')),
        [],
      );
    });

    test('an issuer that does not list the required acr is named in a warning at start', async () => {
      const seen: { event?: unknown; msg: string; required?: unknown }[] = [];
      const strict = await startTestServer(
        { OIDC_ISSUER: issuer.url, STEP_UP_ACR: 'urn:example:acr:gold' },
        { onLog: (entry) => seen.push(entry) },
      );
      try {
        await strict.running.app.acrSupportChecked;
        const [warning] = seen.filter((w) => w.event === 'auth.step_up_unsupported');
        assert.ok(warning, JSON.stringify(seen));
        assert.deepEqual(warning.required, ['urn:example:acr:gold']);
        assert.match(warning.msg, /does not list urn:example:acr:gold in acr_values_supported/);
      } finally {
        await strict.close();
      }
    });
  });
});
