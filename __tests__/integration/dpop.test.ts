// DPoP-bound tokens, in one Jest file: a file loads its modules into a fresh context and costs about 1.5 s of CPU
// before its first test (docs/testing.md#how-long-it-takes). Each top-level describe block below was a test file of its
// own, named after it (the comment above it gives the old file name), with its tests unchanged, starting the servers it
// starts; none shares a server with another block.
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { calculateJwkThumbprint, decodeJwt, exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import request from 'supertest';
import {
  ath,
  dpopLogin,
  type DpopSession,
  fetchWithDpop,
  makeProof,
  type ProofOptions,
  rawProof,
} from '../helpers/dpop.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sharedTestServer } from '../helpers/sharedServer.js';
import { subscriber } from '../helpers/subscriber.js';

/** The default server, for the blocks below that own their data (see the helper). */
const sharedServer = sharedTestServer();

// ─── was __tests__/integration/dpop-proofs.test.ts ───
describe('dpop-proofs', () => {
  const ALGS = 'algs="ES256 RS256 PS256 EdDSA Ed25519"';

  describe('DPoP proofs: each way a proof can be wrong is refused with invalid_dpop_proof', () => {
    let server: TestServer;
    let session: DpopSession;
    let htu: string;
    beforeAll(async () => {
      server = await sharedServer();
      session = await dpopLogin(server.running.app.issuer, 'alice');
      htu = `${server.running.publicUrl}/v1/orders`;
    });

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
});

// ─── was __tests__/integration/dpop-tokens.test.ts ───
describe('dpop-tokens', () => {
  const DPOP_INVALID_TOKEN =
    /^DPoP error="invalid_token", error_description="[^"]+", algs="ES256 RS256 PS256 EdDSA Ed25519"$/;
  const DPOP_INVALID_PROOF =
    /^DPoP error="invalid_dpop_proof", error_description="[^"]+", algs="ES256 RS256 PS256 EdDSA Ed25519"$/;
  const ORDERS = '{ recentOrders(first: 1) { id } }';
  const SUBSCRIPTION = 'subscription { orderCreated { id } }';

  describe('DPoP-bound access tokens (RFC 9449) at the resource server', () => {
    let server: TestServer;
    let publicUrl: string;
    let bound: DpopSession;
    let plain: string;
    beforeAll(async () => {
      server = await sharedServer();
      publicUrl = server.running.publicUrl;
      [bound, plain] = await Promise.all([dpopLogin(server.running.app.issuer, 'alice'), server.token('alice')]);
    });

    test('the embedded IdP binds the token to the key openid-client proved at the token endpoint', async () => {
      assert.equal(bound.tokenType.toLowerCase(), 'dpop');
      const { cnf } = decodeJwt(bound.token) as { cnf?: { jkt?: string } };
      assert.equal(cnf?.jkt, await calculateJwkThumbprint(await exportJWK(bound.keyPair.publicKey)));
    });

    describe('a bound token sent as Bearer is refused (401, DPoP invalid_token)', () => {
      test('REST', async () => {
        const res = await request(server.url)
          .get('/v1/orders')
          .set('authorization', `Bearer ${bound.token}`)
          .expect(401)
          .expect('content-type', /^application\/problem\+json/);
        assert.match(res.headers['www-authenticate']!, DPOP_INVALID_TOKEN);
        assert.match(res.body.detail, /DPoP-bound/);
      });

      test('GraphQL POST', async () => {
        const res = await request(server.url)
          .post('/graphql')
          .set('authorization', `Bearer ${bound.token}`)
          .send({ query: ORDERS })
          .expect(401);
        assert.match(res.headers['www-authenticate']!, DPOP_INVALID_TOKEN);
        assert.equal(res.body.data, undefined);
        assert.equal(res.body.errors[0].extensions.code, 'UNAUTHENTICATED');
      });

      test('SSE', async () => {
        const res = await request(server.url)
          .post('/graphql/stream')
          .set('authorization', `Bearer ${bound.token}`)
          .set('accept', 'text/event-stream')
          .send({ query: SUBSCRIPTION })
          // An accepted stream never ends by itself: cut it so a regression fails rather than waits.
          .timeout({ deadline: 10_000 })
          .expect(401);
        assert.match(res.headers['www-authenticate']!, DPOP_INVALID_TOKEN);
      });

      test('even a DPoP proof beside it does not make a Bearer presentation acceptable', async () => {
        const proof = await makeProof(bound.keyPair, { htm: 'GET', htu: `${publicUrl}/v1/orders`, token: bound.token });
        const res = await request(server.url)
          .get('/v1/orders')
          .set('authorization', `Bearer ${bound.token}`)
          .set('dpop', proof)
          .expect(401);
        assert.match(res.headers['www-authenticate']!, DPOP_INVALID_TOKEN);
      });
    });

    describe("openid-client's own DPoP requests are accepted", () => {
      test('REST GET', async () => {
        const res = await fetchWithDpop(bound, `${publicUrl}/v1/orders`, 'GET');
        assert.equal(res.status, 200);
        assert.ok(Array.isArray(((await res.json()) as { orders: unknown[] }).orders));
      });

      test('REST POST (htm POST)', async () => {
        const res = await fetchWithDpop(bound, `${publicUrl}/v1/orders`, 'POST', {
          body: { items: [{ sku: 'TB-017', qty: 1 }] },
          headers: { 'idempotency-key': randomUUID() },
        });
        assert.equal(res.status, 201, await res.clone().text());
        assert.equal(((await res.json()) as { status: string }).status, 'pending');
      });

      test('GraphQL POST', async () => {
        const res = await fetchWithDpop(bound, `${publicUrl}/graphql`, 'POST', { body: { query: ORDERS } });
        assert.equal(res.status, 200);
        const body = (await res.json()) as { data?: { recentOrders: unknown[] }; errors?: unknown };
        assert.equal(body.errors, undefined);
        assert.ok(Array.isArray(body.data?.recentOrders));
      });

      test('SSE: the stream opens and delivers an order placed afterwards', async () => {
        const res = await fetchWithDpop(bound, `${publicUrl}/graphql/stream`, 'POST', {
          body: { query: SUBSCRIPTION },
          headers: { accept: 'text/event-stream' },
        });
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
        const placed = await fetchWithDpop(bound, `${publicUrl}/v1/orders`, 'POST', {
          body: { items: [{ sku: 'TB-017', qty: 2 }] },
          headers: { 'idempotency-key': randomUUID() },
        });
        assert.equal(placed.status, 201);
        const { id } = (await placed.json()) as { id: string };
        const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
        let text = '';
        while (!text.includes(id)) {
          const chunk = await reader.read();
          assert.ok(!chunk.done, `the stream ended before delivering ${id}: ${text}`);
          text += chunk.value;
        }
        await reader.cancel();
      });
    });

    test('a bound token accepted once (and remembered) is still held to its proof', async () => {
      await fetchWithDpop(bound, `${publicUrl}/v1/orders`, 'GET').then((res) => assert.equal(res.status, 200));
      const asBearer = await request(server.url).get('/v1/orders').set('authorization', `Bearer ${bound.token}`);
      assert.equal(asBearer.status, 401);
      const withoutProof = await request(server.url).get('/v1/orders').set('authorization', `DPoP ${bound.token}`);
      assert.equal(withoutProof.status, 401);
      assert.match(withoutProof.headers['www-authenticate']!, DPOP_INVALID_PROOF);
    });

    test('an unbound token keeps working as Bearer, with or without a stray DPoP header', async () => {
      await request(server.url).get('/v1/orders').set('authorization', `Bearer ${plain}`).expect(200);
      await request(server.url).get('/v1/orders').set('authorization', `Bearer ${plain}`).set('dpop', 'x').expect(200);
      const res = await request(server.url)
        .post('/graphql')
        .set('authorization', `Bearer ${plain}`)
        .send({ query: ORDERS });
      assert.equal(res.status, 200);
      assert.equal(res.body.errors, undefined);
    });

    test('an unbound token presented with the DPoP scheme is refused as invalid_token', async () => {
      const proof = await makeProof(bound.keyPair, { htm: 'GET', htu: `${publicUrl}/v1/orders`, token: plain });
      const res = await request(server.url)
        .get('/v1/orders')
        .set('authorization', `DPoP ${plain}`)
        .set('dpop', proof)
        .expect(401);
      assert.match(res.headers['www-authenticate']!, DPOP_INVALID_TOKEN);
      assert.match(res.body.detail, /not DPoP-bound/);
    });

    describe('WebSocket (graphql-ws) refuses bound tokens', () => {
      test('a bound token in connection_init closes the socket with 4403 and says why', async () => {
        const ws = subscriber(server.url, bound.token);
        // Whichever comes first: an acknowledged connection fails the test instead of waiting for a close.
        const closed = await Promise.race([ws.closed(), ws.connected().then(() => ({ code: 0, reason: 'connected' }))]);
        await ws.dispose();
        assert.equal(closed.code, 4403);
        assert.equal(
          closed.reason,
          'Forbidden: DPoP-bound access tokens are not accepted over WebSocket; use a Bearer token',
        );
      });

      test('an unbound Bearer token still subscribes, and receives the order placed afterwards', async () => {
        const ws = subscriber(server.url, plain);
        await ws.connected();
        const listening = server.nextSubscription();
        const subscription = ws.subscribe(SUBSCRIPTION);
        try {
          await listening;
          const created = await request(server.url)
            .post('/v1/orders')
            .set('authorization', `Bearer ${plain}`)
            .set('idempotency-key', randomUUID())
            .send({ items: [{ sku: 'DL-009', qty: 1 }] })
            .expect(201);
          await subscription.next(1);
          assert.deepEqual(
            subscription.received.map((r) => r.data),
            [{ orderCreated: { id: created.body.id } }],
          );
        } finally {
          subscription.dispose();
          await ws.dispose();
        }
      });
    });
  });
});

// ─── was __tests__/integration/dpop-replicas.test.ts ───
describe('dpop-replicas', () => {
  // Redis when the environment has one (CI's second pass), and the database table always: REDIS_URL=''
  // turns Redis off for one pair of replicas, so the table is exercised on PGlite and on PostgreSQL alike.
  const STORES = process.env.REDIS_URL ? (['Redis', 'the database'] as const) : (['the database'] as const);

  for (const store of STORES) {
    describe(`a DPoP proof is good for one request across replicas (used ids kept in ${store})`, () => {
      const env: Record<string, string> = store === 'Redis' ? {} : { REDIS_URL: '' };
      let a: TestServer;
      let b: TestServer;
      let session: DpopSession;
      let htu: string;
      beforeAll(async () => {
        a = await startTestServer(env, { replicated: true });
        // Both behind one load balancer: one PUBLIC_URL, so a proof's htu is valid at either replica.
        b = await startTestServer(
          { ...env, OIDC_ISSUER: a.running.app.issuer, PUBLIC_URL: a.running.publicUrl },
          { sameDatabaseAs: a },
        );
        session = await dpopLogin(a.running.app.issuer, 'alice');
        htu = `${a.running.publicUrl}/v1/orders`;
      });
      afterAll(async () => {
        await b.close();
        await a.close();
      });

      const send = (server: TestServer, dpop: string) =>
        request(server.url).get('/v1/orders').set('authorization', `DPoP ${session.token}`).set('dpop', dpop);
      const proof = (jti?: string) =>
        makeProof(session.keyPair, { htm: 'GET', htu, token: session.token, ...(jti ? { jti } : {}) });

      test('a proof used on one replica is refused on the other', async () => {
        const dpop = await proof();
        await send(a, dpop).expect(200);
        const res = await send(b, dpop).expect(401);
        assert.match(res.headers['www-authenticate']!, /^DPoP error="invalid_dpop_proof".*already used/);
      });

      test('the other replica accepts a fresh proof for the same URL (control)', async () => {
        await send(b, await proof()).expect(200);
      });

      test('the same proof sent to both replicas at once is accepted exactly once', async () => {
        const dpop = await proof();
        const statuses = (await Promise.all([send(a, dpop), send(b, dpop)])).map((r) => r.status).sort();
        assert.deepEqual(statuses, [200, 401]);
      });

      if (store === 'the database') {
        const keyFor = async (jti: string) => {
          const jkt = await calculateJwkThumbprint(await exportJWK(session.keyPair.publicKey));
          return createHash('sha256').update(`${jkt}.${jti}`).digest('base64url');
        };

        test('an id whose record has expired can be used again', async () => {
          const jti = `expired-${Date.now()}`;
          await a.running.app.db.query(
            `insert into dpop_proof_jtis (key, expires_at) values ($1, now() - interval '1 minute')`,
            [await keyFor(jti)],
          );
          await send(a, await proof(jti)).expect(200);
          await send(b, await proof(jti)).expect(401);
        });

        test('expired records are deleted by the shared sweeper of expired rows', async () => {
          // A record still in use, of this test's own: the sweeper must keep it.
          const liveJti = `kept-${randomUUID()}`;
          await send(a, await proof(liveJti)).expect(200);
          const expired = await keyFor(`swept-${Date.now()}`);
          await a.running.app.db.query(
            `insert into dpop_proof_jtis (key, expires_at) values ($1, now() - interval '1 minute')`,
            [expired],
          );
          assert.equal(await b.running.app.sweeper.runOnce(), true);
          const rows = await a.running.app.db.query('select key from dpop_proof_jtis where key = $1', [expired]);
          assert.equal(rows.length, 0);
          const live = await a.running.app.db.query(
            'select count(*)::int as n from dpop_proof_jtis where key = $1 and expires_at > now()',
            [await keyFor(liveJti)],
          );
          assert.equal((live[0] as { n: number }).n, 1, 'records still in use are kept');
        });
      }
    });
  }
});
