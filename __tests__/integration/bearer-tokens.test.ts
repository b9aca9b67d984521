import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, jest, test } from '@jest/globals';
import { generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';
import { startTestServer, type TestServer } from '../helpers/server.js';

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
    server = await startTestServer();
    alice = await server.token('alice');
    // Tokens signed with the IdP's own key prove that each refusal below is for the reason it names.
    const [row] = await server.running.app.db.query<{ jwks: { keys: JWK[] } }>('select jwks from idp_keys');
    rsaKey = row!.jwks.keys.find((k) => k.alg === 'RS256')!;
  });
  afterAll(() => server.close());

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
