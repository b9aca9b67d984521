import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { Validator } from '@seriousme/openapi-schema-validator';
import { openapiDocument } from '../../src/http/rest/openapi.js';
import { rest, type RestResponse } from '../helpers/openapi.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface OrderBody {
  id: string;
  customer_id: string;
  status: string;
  items: { sku: string; qty: number; unit_price_cents: number; line_total_cents: number }[];
  total_cents: number;
  created_at: string;
  updated_at: string;
}
interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: string;
  errors?: { pointer: string; reason: string }[];
}

describe('REST orders', () => {
  let server: TestServer;
  let alice: string;
  let bob: string;
  let carol: string;
  beforeAll(async () => {
    server = await startTestServer();
    ({ alice, bob, carol } = await server.users());
  });
  afterAll(() => server.close());

  const call = (method: string, path: string, opts: Parameters<typeof rest>[3] = {}) =>
    rest(server.url, method, path, opts);
  const create = async (token: string, items = [{ sku: 'KB-001', qty: 1 }]) => {
    const res = await call('POST', '/orders', { token, body: { items }, headers: { 'idempotency-key': randomUUID() } });
    assert.equal(res.status, 201, res.text);
    return { res, order: res.json<OrderBody>(), etag: res.headers.get('etag')! };
  };
  const assertProblem = (res: RestResponse, status: number, code: string) => {
    assert.equal(res.status, status, res.text);
    assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    const body = res.json<ProblemBody>();
    assert.equal(body.status, status);
    assert.equal(body.code, code);
    assert.match(body.type, /^\/problems\/[a-z-]+$/);
    return body;
  };

  test('the OpenAPI document is valid OpenAPI 3.1', async () => {
    const result = await new Validator().validate(openapiDocument as unknown as Record<string, unknown>);
    assert.deepEqual(result.errors, undefined);
    assert.equal(result.valid, true);
    const served = await server.http.get('/v1/openapi.json');
    assert.equal(served.status, 200);
    assert.deepEqual(served.body, JSON.parse(JSON.stringify(openapiDocument)));
  });

  test('POST creates an order: 201, Location, ETag and the representation', async () => {
    const { res, order, etag } = await create(alice, [
      { sku: 'KB-001', qty: 2 },
      { sku: 'MP-011', qty: 1 },
    ]);
    assert.equal(res.headers.get('location'), `/v1/orders/${order.id}`);
    assert.equal(etag, `"${order.id}.v1"`);
    assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.headers.get('idempotent-replayed'), null);
    assert.deepEqual(order, {
      id: order.id,
      customer_id: order.customer_id,
      status: 'pending',
      items: [
        { sku: 'KB-001', qty: 2, unit_price_cents: 8900, line_total_cents: 17800 },
        { sku: 'MP-011', qty: 1, unit_price_cents: 900, line_total_cents: 900 },
      ],
      total_cents: 18700,
      created_at: order.created_at,
      updated_at: order.created_at,
    });
  });

  test('GET returns the order with a strong ETag and private caching; If-None-Match gives an empty 304', async () => {
    const { order, etag } = await create(alice);
    const res = await call('GET', `/orders/${order.id}`, { token: alice });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('etag'), etag);
    assert.equal(res.headers.get('cache-control'), 'private, no-cache');
    assert.equal(res.headers.get('vary'), 'Authorization');
    assert.deepEqual(res.json(), order);

    const cached = await call('GET', `/orders/${order.id}`, { token: alice, headers: { 'if-none-match': etag } });
    assert.equal(cached.status, 304);
    assert.equal(cached.text, '');
    assert.equal(cached.headers.get('etag'), etag);
    const weak = await call('GET', `/orders/${order.id}`, {
      token: alice,
      headers: { 'if-none-match': `"x", W/${etag}` },
    });
    assert.equal(weak.status, 304, 'If-None-Match uses weak comparison');
  });

  test('HEAD answers with the headers of GET and no body', async () => {
    const { order, etag } = await create(alice);
    const res = await call('HEAD', `/orders/${order.id}`, { token: alice });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('etag'), etag);
    assert.equal(res.text, '');
  });

  test('a cached GET revalidates to 304 before a PATCH and to 200 with a new ETag after it', async () => {
    const { order, etag } = await create(alice);
    assert.equal(
      (await call('GET', `/orders/${order.id}`, { token: carol, headers: { 'if-none-match': etag } })).status,
      304,
    );
    const patched = await call('PATCH', `/orders/${order.id}`, {
      token: carol,
      body: { status: 'paid' },
      headers: { 'if-match': etag },
    });
    assert.equal(patched.status, 200);
    const newEtag = patched.headers.get('etag');
    assert.equal(newEtag, `"${order.id}.v2"`);
    assert.equal(patched.json<OrderBody>().status, 'paid');
    const after = await call('GET', `/orders/${order.id}`, { token: carol, headers: { 'if-none-match': etag } });
    assert.equal(after.status, 200);
    assert.equal(after.headers.get('etag'), newEtag);
  });

  test('PATCH needs If-Match (428), refuses a stale one (412) and a weak one (412)', async () => {
    const { order, etag } = await create(alice);
    assertProblem(
      await call('PATCH', `/orders/${order.id}`, { token: carol, body: { status: 'paid' } }),
      428,
      'PRECONDITION_REQUIRED',
    );
    const stale = `"${order.id}.v9"`;
    assertProblem(
      await call('PATCH', `/orders/${order.id}`, {
        token: carol,
        body: { status: 'paid' },
        headers: { 'if-match': stale },
      }),
      412,
      'PRECONDITION_FAILED',
    );
    assertProblem(
      await call('PATCH', `/orders/${order.id}`, {
        token: carol,
        body: { status: 'paid' },
        headers: { 'if-match': `W/${etag}` },
      }),
      412,
      'PRECONDITION_FAILED',
    );
    const star = await call('PATCH', `/orders/${order.id}`, {
      token: carol,
      body: { status: 'paid' },
      headers: { 'if-match': '*' },
    });
    assert.equal(star.status, 200);
  });

  test('PATCH takes a merge patch as application/merge-patch+json or application/json; others are 415 with Accept-Patch', async () => {
    const { order, etag } = await create(alice);
    for (const type of ['text/plain', 'application/json-patch+json']) {
      const res = await call('PATCH', `/orders/${order.id}`, {
        token: carol,
        raw: '{"status":"paid"}',
        headers: { 'content-type': type, 'if-match': etag },
      });
      assertProblem(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
      assert.equal(res.headers.get('accept-patch'), 'application/merge-patch+json, application/json');
    }
    const plain = await call('PATCH', `/orders/${order.id}`, {
      token: carol,
      raw: '{"status":"paid"}',
      headers: { 'content-type': 'application/json', 'if-match': etag },
    });
    assert.equal(plain.status, 200, plain.text);
    assert.equal(plain.json<OrderBody>().status, 'paid');
    assert.equal(plain.headers.get('etag'), `"${order.id}.v2"`);
  });

  test('PATCH names read-only and unknown members (422), and refuses to remove status', async () => {
    const { order, etag } = await create(alice);
    const res = await call('PATCH', `/orders/${order.id}`, {
      token: carol,
      body: { status: 'paid', total_cents: 1, colour: 'red' },
      headers: { 'if-match': etag },
    });
    const body = assertProblem(res, 422, 'BAD_USER_INPUT');
    assert.deepEqual(body.errors, [
      { pointer: '/total_cents', reason: 'is read-only here' },
      { pointer: '/colour', reason: 'is not a member of this resource' },
    ]);
    const removal = await call('PATCH', `/orders/${order.id}`, {
      token: carol,
      body: { status: null },
      headers: { 'if-match': etag },
    });
    assert.deepEqual(assertProblem(removal, 422, 'BAD_USER_INPUT').errors, [
      { pointer: '/status', reason: 'must be a status string; it cannot be removed' },
    ]);
  });

  test('PATCH follows the lifecycle: an illegal move is 409', async () => {
    const { order, etag } = await create(alice);
    const res = await call('PATCH', `/orders/${order.id}`, {
      token: carol,
      body: { status: 'delivered' },
      headers: { 'if-match': etag },
    });
    const body = assertProblem(res, 409, 'INVALID_TRANSITION');
    assert.equal(body.detail, 'An order that is pending cannot become delivered; it can become paid or cancelled.');
    assert.equal(body.instance, `/v1/orders/${order.id}`);
  });

  test('a customer may cancel their own pending order but not pay it (403)', async () => {
    const { order, etag } = await create(alice);
    assertProblem(
      await call('PATCH', `/orders/${order.id}`, {
        token: alice,
        body: { status: 'paid' },
        headers: { 'if-match': etag },
      }),
      403,
      'FORBIDDEN',
    );
    const res = await call('PATCH', `/orders/${order.id}`, {
      token: alice,
      body: { status: 'cancelled' },
      headers: { 'if-match': etag },
    });
    assert.equal(res.status, 200);
    assert.equal(res.json<OrderBody>().status, 'cancelled');
  });

  test("alice's token on bob's order is 404 for GET, HEAD, PATCH, PUT and DELETE", async () => {
    const { order, etag } = await create(bob);
    const headers = { 'if-match': etag };
    assertProblem(await call('GET', `/orders/${order.id}`, { token: alice }), 404, 'NOT_FOUND');
    assert.equal((await call('HEAD', `/orders/${order.id}`, { token: alice })).status, 404);
    assertProblem(
      await call('PATCH', `/orders/${order.id}`, { token: alice, body: { status: 'cancelled' }, headers }),
      404,
      'NOT_FOUND',
    );
    assertProblem(
      await call('PUT', `/orders/${order.id}`, { token: alice, body: { items: [{ sku: 'KB-001', qty: 1 }] }, headers }),
      404,
      'NOT_FOUND',
    );
    assertProblem(await call('DELETE', `/orders/${order.id}`, { token: alice, headers }), 404, 'NOT_FOUND');
    // and bob's order is unchanged
    assert.equal(
      (await call('GET', `/orders/${order.id}`, { token: bob, headers: { 'if-none-match': etag } })).status,
      304,
    );
  });

  test('DELETE is staff only: a customer gets 403 on their own order; staff get 204, honouring If-Match', async () => {
    const { order, etag } = await create(alice);
    assertProblem(await call('DELETE', `/orders/${order.id}`, { token: alice }), 403, 'FORBIDDEN');
    assertProblem(
      await call('DELETE', `/orders/${order.id}`, { token: carol, headers: { 'if-match': `"${order.id}.v7"` } }),
      412,
      'PRECONDITION_FAILED',
    );
    const res = await call('DELETE', `/orders/${order.id}`, { token: carol, headers: { 'if-match': etag } });
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    assertProblem(await call('GET', `/orders/${order.id}`, { token: carol }), 404, 'NOT_FOUND');
    const other = await create(alice);
    assert.equal(
      (await call('DELETE', `/orders/${other.order.id}`, { token: carol })).status,
      204,
      'If-Match is optional',
    );
  });

  test('PUT replaces the items of a pending order, recomputing the total; not once it is paid (409)', async () => {
    const { order, etag } = await create(alice);
    const res = await call('PUT', `/orders/${order.id}`, {
      token: alice,
      body: { items: [{ sku: 'HS-004', qty: 2 }] },
      headers: { 'if-match': etag },
    });
    assert.equal(res.status, 200, res.text);
    const replaced = res.json<OrderBody>();
    assert.deepEqual(replaced.items, [{ sku: 'HS-004', qty: 2, unit_price_cents: 5900, line_total_cents: 11800 }]);
    assert.equal(replaced.total_cents, 11800);
    assert.equal(res.headers.get('etag'), `"${order.id}.v2"`);
    assertProblem(
      await call('PUT', `/orders/${order.id}`, {
        token: alice,
        body: { items: [{ sku: 'HS-004', qty: 1 }] },
        headers: { 'if-match': etag },
      }),
      412,
      'PRECONDITION_FAILED',
    );
    assertProblem(
      await call('PUT', `/orders/${order.id}`, { token: alice, body: { items: [{ sku: 'HS-004', qty: 1 }] } }),
      428,
      'PRECONDITION_REQUIRED',
    );
    const paid = await call('PATCH', `/orders/${order.id}`, {
      token: carol,
      body: { status: 'paid' },
      headers: { 'if-match': '*' },
    });
    const late = await call('PUT', `/orders/${order.id}`, {
      token: alice,
      body: { items: [{ sku: 'HS-004', qty: 1 }] },
      headers: { 'if-match': paid.headers.get('etag')! },
    });
    assertProblem(late, 409, 'NOT_EDITABLE');
  });

  test('validation lists one entry per invalid field with a JSON pointer (422)', async () => {
    const res = await call('POST', '/orders', {
      token: alice,
      body: {
        items: [
          { sku: 'NOPE', qty: 1 },
          { sku: 'KB-001', qty: 0 },
        ],
        status: 'paid',
      },
      headers: { 'idempotency-key': randomUUID() },
    });
    const first = assertProblem(res, 422, 'BAD_USER_INPUT');
    assert.deepEqual(first.errors, [{ pointer: '/status', reason: 'is read-only here' }]);
    const second = await call('POST', '/orders', {
      token: alice,
      body: {
        items: [
          { sku: 'NOPE', qty: 1 },
          { sku: 'KB-001', qty: 0 },
          { sku: 'KB-001', qty: 'two' },
        ],
      },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.deepEqual(assertProblem(second, 422, 'BAD_USER_INPUT').errors, [
      { pointer: '/items/2/qty', reason: 'Invalid input: expected number, received string' },
    ]);
    const third = await call('POST', '/orders', {
      token: alice,
      body: {
        items: [
          { sku: 'NOPE', qty: 1 },
          { sku: 'KB-001', qty: 0 },
        ],
      },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.deepEqual(assertProblem(third, 422, 'BAD_USER_INPUT').errors, [
      { pointer: '/items/0/sku', reason: 'unknown SKU "NOPE"' },
      { pointer: '/items/1/qty', reason: 'must be an integer from 1 to 999' },
    ]);
  });

  test('malformed JSON is 400, a wrong content type 415, an oversized body 413', async () => {
    const key = { 'idempotency-key': randomUUID() };
    assertProblem(
      await call('POST', '/orders', { token: alice, raw: '{"items": [', headers: key }),
      400,
      'MALFORMED_REQUEST',
    );
    assertProblem(
      await call('POST', '/orders', {
        token: alice,
        raw: 'items=1',
        headers: { ...key, 'content-type': 'application/x-www-form-urlencoded' },
      }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    const huge = JSON.stringify({ items: Array.from({ length: 3000 }, () => ({ sku: 'KB-001', qty: 1 })) });
    assertProblem(await call('POST', '/orders', { token: alice, raw: huge, headers: key }), 413, 'PAYLOAD_TOO_LARGE');
  });

  test('a wrong method is 405 with Allow; an unknown path is a 404 problem', async () => {
    const res = await call('POST', '/orders/ord_00000000000000000000000000', { token: alice, body: {} });
    assertProblem(res, 405, 'METHOD_NOT_ALLOWED');
    assert.equal(res.headers.get('allow'), 'GET, HEAD, PATCH, PUT, DELETE');
    const put = await call('PUT', '/orders', { token: alice, body: {} });
    assert.equal(put.headers.get('allow'), 'GET, HEAD, POST');
    const unknown = await server.http.get('/v1/customers').set({ authorization: `Bearer ${alice}` });
    assert.equal(unknown.status, 404);
    assert.equal((unknown.body as ProblemBody).code, 'ROUTE_NOT_FOUND');
  });

  test('no credentials: 401 with a Bearer challenge; a bad token: 401 invalid_token', async () => {
    const none = await call('GET', '/orders');
    assertProblem(none, 401, 'UNAUTHENTICATED');
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="orders-api"');
    const bad = await call('GET', '/orders', { token: `${alice}x` });
    assertProblem(bad, 401, 'UNAUTHENTICATED');
    assert.match(bad.headers.get('www-authenticate')!, /^Bearer realm="orders-api", error="invalid_token"/);
  });

  test('lists newest first in cursor pages with Link rel=next; a customer lists only their own', async () => {
    const first = await call('GET', '/orders?limit=5', { token: carol });
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('cache-control'), 'private, no-cache');
    const page1 = first.json<{ orders: OrderBody[]; next_cursor: string }>();
    assert.equal(page1.orders.length, 5);
    assert.equal(first.headers.get('link'), `</v1/orders?limit=5&cursor=${page1.next_cursor}>; rel="next"`);
    const second = await call('GET', `/orders?limit=5&cursor=${page1.next_cursor}`, { token: carol });
    const page2 = second.json<{ orders: OrderBody[] }>();
    const all = [...page1.orders, ...page2.orders];
    assert.equal(new Set(all.map((o) => o.id)).size, 10, 'no overlap between pages');
    const times = all.map((o) => Date.parse(o.created_at));
    assert.deepEqual(
      times,
      [...times].sort((a, b) => b - a),
    );

    const mine = await call('GET', '/orders?limit=100', { token: alice });
    const own = mine.json<{ orders: OrderBody[] }>().orders;
    assert.equal(new Set(own.map((o) => o.customer_id)).size, 1);
    assert.equal(
      (await call('GET', '/orders?limit=1000', { token: carol })).json<{ orders: unknown[] }>().orders.length,
      100,
    );
    assertProblem(await call('GET', '/orders?limit=0', { token: carol }), 400, 'MALFORMED_REQUEST');
    assertProblem(await call('GET', '/orders?cursor=bm9wZQ', { token: carol }), 400, 'MALFORMED_REQUEST');
  });

  test('a token without orders:write gets 403 insufficient_scope on writes', async () => {
    const res = await call('POST', '/orders', {
      token: await readOnlyToken(server),
      body: { items: [{ sku: 'KB-001', qty: 1 }] },
      headers: { 'idempotency-key': randomUUID() },
    });
    assertProblem(res, 403, 'INSUFFICIENT_SCOPE');
    assert.match(res.headers.get('www-authenticate')!, /error="insufficient_scope".*scope="orders:write"/);
  });

  test('every problem type has a human page', async () => {
    const res = await server.http.get('/problems/precondition-failed');
    assert.equal(res.status, 200);
    assert.match(res.get('content-type')!, /^text\/html/);
    assert.match(res.text, /<h1>Precondition failed<\/h1>/);
    assert.equal((await server.http.get('/problems/nope')).status, 404);
  });
});

/** A real token from the embedded IdP that was granted only orders:read. */
async function readOnlyToken(server: TestServer): Promise<string> {
  const { loginWithPkce } = await import('../../src/auth/pkceLogin.js');
  const { accessToken } = await loginWithPkce({
    issuer: server.running.app.issuer,
    username: 'bob',
    password: 'bob',
    scope: 'openid orders:read',
  });
  return accessToken;
}
