import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, jest, test } from '@jest/globals';
import { exportJWK, generateKeyPair, importJWK, SignJWT, type CryptoKey, type JWK } from 'jose';
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
    const old = await tokenOf(first);
    assert.equal((await ask(old)).status, 200);
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
