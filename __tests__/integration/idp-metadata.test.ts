import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { decodeJwt, importJWK, SignJWT, type JWK } from 'jose';
import * as oidc from 'openid-client';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** What the embedded IdP's discovery document promises, checked with a relying party's own library. */
describe('embedded IdP metadata tells the truth', () => {
  let server: TestServer;
  let issuer: string;
  let apiUrl: string;
  beforeAll(async () => {
    server = await startTestServer();
    issuer = server.running.app.issuer;
    apiUrl = server.running.publicUrl;
  });
  afterAll(() => server.close());

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
    assert.equal((await oidc.fetchUserInfo(tokens.config, refreshed.access_token, 'alice')).email, 'alice@example.com');
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
    const { accessToken } = await login();
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
