import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';
import request from 'supertest';
import { ath, dpopLogin, makeProof, rawProof, type DpopSession, type ProofOptions } from '../helpers/dpop.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ALGS = 'algs="ES256 RS256 PS256 EdDSA Ed25519"';

describe('DPoP proofs: each way a proof can be wrong is refused with invalid_dpop_proof', () => {
  let server: TestServer;
  let session: DpopSession;
  let htu: string;
  beforeAll(async () => {
    server = await startTestServer();
    session = await dpopLogin(server.running.app.issuer, 'alice');
    htu = `${server.running.publicUrl}/v1/orders`;
  });
  afterAll(() => server.close());

  const proof = (opts: Partial<ProofOptions> = {}, keyPair = session.keyPair) =>
    makeProof(keyPair, { htm: 'GET', htu, token: session.token, ...opts });

  const send = (dpop: string | string[] | undefined, token = session.token) => {
    const req = request(server.url).get('/v1/orders').set('authorization', `DPoP ${token}`);
    // superagent sends an array as one header line per value; its types allow arrays only for Cookie.
    return dpop === undefined ? req : req.set('dpop', dpop as string);
  };

  const assertRefused = async (dpop: string | string[] | undefined, description: RegExp) => {
    const res = await send(dpop)
      .expect(401)
      .expect('content-type', /^application\/problem\+json/);
    const challenge = res.headers['www-authenticate']!;
    assert.match(challenge, /^DPoP error="invalid_dpop_proof", error_description="[^"]*", /);
    assert.ok(challenge.endsWith(ALGS), challenge);
    assert.match(challenge, description);
    assert.equal(res.body.status, 401);
    assert.match(res.body.detail, description);
  };

  test('accepts a hand-made proof (control: every case below changes one thing in it)', async () => {
    await send(await proof()).expect(200);
  });

  test('accepts a proof whose htu carries a query and fragment, for a request with a query', async () => {
    const dpop = await proof({ htu: `${htu}?limit=1#x` });
    await request(server.url)
      .get('/v1/orders?limit=1')
      .set('authorization', `DPoP ${session.token}`)
      .set('dpop', dpop)
      .expect(200);
  });

  test('compares htu after normalising scheme and host case (RFC 3986 §6.2.2)', async () => {
    const shouted = htu.replace(/^http:\/\/localhost/, 'HTTP://LOCALHOST');
    assert.notEqual(shouted, htu);
    await send(await proof({ htu: shouted })).expect(200);
  });

  test('refuses a request without a proof', () => assertRefused(undefined, /needs a DPoP proof/));
  test('refuses two DPoP headers', async () => assertRefused([await proof(), await proof()], /exactly one/));
  test('refuses a proof that is not a JWT', () => assertRefused('not-a-jwt', /not a JWT/));
  test('refuses typ JWT', async () => assertRefused(await proof({ header: { typ: 'JWT' } }), /typ/));
  test('refuses the wrong htm', async () => assertRefused(await proof({ htm: 'POST' }), /htm must be GET/));
  test('refuses the wrong htu (another path)', async () =>
    assertRefused(await proof({ htu: `${server.running.publicUrl}/v1/orders/ord_x` }), /htu must be/));
  test('refuses an htu naming the listening address instead of PUBLIC_URL', async () => {
    assert.notEqual(new URL(server.url).host, new URL(htu).host);
    await assertRefused(await proof({ htu: `${server.url}/v1/orders` }), /htu must be/);
  });
  test('refuses a stale iat (older than 60 s)', async () =>
    assertRefused(await proof({ iat: Math.floor(Date.now() / 1000) - 120 }), /iat/));
  test('refuses an iat more than 60 s ahead', async () =>
    assertRefused(await proof({ iat: Math.floor(Date.now() / 1000) + 120 }), /iat/));
  test('refuses the wrong ath (another token)', async () =>
    assertRefused(await proof({ claims: { ath: ath('another token') } }), /ath/));
  test('refuses a missing ath', async () => assertRefused(await proof({ claims: { ath: undefined } }), /ath/));
  test('refuses a missing jti', async () => assertRefused(await proof({ claims: { jti: undefined } }), /jti/));

  test('refuses a proof made with another key (thumbprint is not cnf.jkt)', async () => {
    const other = await generateKeyPair('ES256', { extractable: true });
    await assertRefused(await proof({}, other), /not the key the access token is bound to/);
  });

  test("refuses a proof naming the token's key but signed with another", async () => {
    const other = await generateKeyPair('ES256');
    await assertRefused(await proof({ signWith: other.privateKey }), /signature/);
  });

  test('refuses alg none', async () => {
    const jwk = await exportJWK(session.keyPair.publicKey);
    const claims = { htm: 'GET', htu, iat: Math.floor(Date.now() / 1000), jti: 'none-1', ath: ath(session.token) };
    await assertRefused(rawProof({ typ: 'dpop+jwt', alg: 'none', jwk }, claims), /alg must be one of/);
  });

  test('refuses HS256 (a shared secret proves nothing)', async () => {
    const secret = new TextEncoder().encode('0123456789abcdef0123456789abcdef');
    await assertRefused(await proof({ header: { alg: 'HS256' }, signWith: secret }), /alg must be one of/);
  });

  test('refuses a jwk that carries the private key', async () => {
    const other = await generateKeyPair('ES256', { extractable: true });
    const jwk = await exportJWK(other.privateKey);
    await assertRefused(await proof({ header: { jwk } }, other), /public key/);
  });

  test('refuses an RSA jwk larger than 4096 bits before any signature work', async () => {
    const jwk = { kty: 'RSA', n: 'A'.repeat(1366), e: 'AQAB' };
    const claims = { htm: 'GET', htu, iat: Math.floor(Date.now() / 1000), jti: 'rsa-1', ath: ath(session.token) };
    await assertRefused(
      rawProof({ typ: 'dpop+jwt', alg: 'RS256', jwk }, claims, 'A'.repeat(1366)),
      /at most 4096 bits/,
    );
  });

  test('refuses a replayed proof (the same jti twice)', async () => {
    const dpop = await proof();
    await send(dpop).expect(200);
    await assertRefused(dpop, /already used/);
  });

  test('GraphQL answers a bad proof with UNAUTHENTICATED and the same challenge', async () => {
    const dpop = await proof({ htm: 'POST' });
    const res = await request(server.url)
      .post('/graphql')
      .set('authorization', `DPoP ${session.token}`)
      .set('dpop', dpop)
      .send({ query: '{ recentOrders(first: 1) { id } }' })
      .expect(401);
    assert.match(res.headers['www-authenticate']!, /^DPoP error="invalid_dpop_proof", .*htu must be .*\/graphql/);
    assert.equal(res.body.errors[0].extensions.code, 'UNAUTHENTICATED');
  });

  test('SSE answers a proof for another URL with 401', async () => {
    const res = await request(server.url)
      .post('/graphql/stream')
      .set('authorization', `DPoP ${session.token}`)
      .set('dpop', await proof({ htm: 'POST' }))
      .set('accept', 'text/event-stream')
      .send({ query: 'subscription { orderCreated { id } }' })
      // An accepted stream never ends by itself: cut it so a regression fails rather than waits.
      .timeout({ deadline: 10_000 })
      .expect(401);
    assert.match(res.headers['www-authenticate']!, /^DPoP error="invalid_dpop_proof"/);
  });

  describe('each allowed algorithm works, others do not', () => {
    let signingKey: JWK;
    beforeAll(async () => {
      const [row] = await server.running.app.db.query<{ jwks: { keys: JWK[] } }>('select jwks from idp_keys');
      signingKey = row!.jwks.keys.find((k) => k.alg === 'RS256')!;
    });

    /** A token the IdP's own key signs, bound to `keyPair`: the embedded IdP itself binds only ES256 and EdDSA keys. */
    const boundTo = async (keyPair: DpopSession['keyPair']) => {
      const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey));
      return new SignJWT({ sub: 'alice', scope: 'orders:read', roles: [], cnf: { jkt } })
        .setProtectedHeader({ alg: 'RS256', kid: signingKey.kid!, typ: 'at+jwt' })
        .setIssuer(server.running.app.issuer)
        .setAudience('orders-api')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(await importJWK(signingKey, 'RS256'));
    };

    for (const alg of ['RS256', 'PS256', 'Ed25519', 'EdDSA'] as const) {
      test(`accepts ${alg}`, async () => {
        const keyPair = await generateKeyPair(alg, { extractable: true });
        const token = await boundTo(keyPair);
        const dpop = await makeProof(keyPair, { htm: 'GET', htu, token, header: { alg } });
        await send(dpop, token).expect(200);
      });
    }

    test('refuses ES384', async () => {
      const keyPair = await generateKeyPair('ES384', { extractable: true });
      const token = await boundTo(keyPair);
      const dpop = await makeProof(keyPair, { htm: 'GET', htu, token, header: { alg: 'ES384' } });
      const res = await send(dpop, token).expect(401);
      assert.match(res.headers['www-authenticate']!, /invalid_dpop_proof.*alg must be one of/);
    });

    test('an Ed25519 key bound by the embedded IdP itself works through openid-client', async () => {
      const ed = await dpopLogin(server.running.app.issuer, 'bob', 'Ed25519');
      await send(await makeProof(ed.keyPair, { htm: 'GET', htu, token: ed.token }), ed.token).expect(200);
    });
  });
});
