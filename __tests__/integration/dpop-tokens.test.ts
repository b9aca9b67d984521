import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import request from 'supertest';
import { dpopLogin, fetchWithDpop, makeProof, type DpopSession } from '../helpers/dpop.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { subscriber } from '../helpers/subscriber.js';

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
    server = await startTestServer();
    publicUrl = server.running.publicUrl;
    [bound, plain] = await Promise.all([dpopLogin(server.running.app.issuer, 'alice'), server.token('alice')]);
  });
  afterAll(() => server.close());

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
