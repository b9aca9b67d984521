// The REST API: orders, the contract, hostile input, idempotency, rate limits, security headers, in one Jest file: a
// file loads its modules into a fresh context and costs about 1.5 s of CPU before its first test (docs/testing.md#how-
// long-it-takes). Each top-level describe block below was a test file of its own, named after it (the comment above it
// gives the old file name), with its tests unchanged, starting the servers it starts; none shares a server with another
// block.
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync, zstdCompressSync } from 'node:zlib';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { Validator } from '@seriousme/openapi-schema-validator';
import * as addFormatsModule from 'ajv-formats';
import { Ajv2020 } from 'ajv/dist/2020.js';
import createClient, { type Middleware } from 'openapi-fetch';
import request from 'supertest';
import { REST_CLIENT_TYPES, restClientTypes } from '../../scripts/contract/restClient.js';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { openapiDocument } from '../../src/http/rest/openapi.js';
import type { paths } from '../generated/rest-client.js';
import type { Problem } from '../helpers/http.js';
import { type RedisServer, startRedis } from '../helpers/infra.js';
import {
  assertDocumented,
  releasedContract,
  responseValidator,
  type ResponseValidator,
  rest,
  type RestOptions,
  type RestResponse,
} from '../helpers/openapi.js';
import { startReplicas, startTestServer, stopReplicas, type TestServer } from '../helpers/server.js';
import { sharedTestServer } from '../helpers/sharedServer.js';
import { idpSignedToken } from '../helpers/tokens.js';
import { location, signIn, startLogin, WebClient } from '../helpers/webClient.js';

/** The default server, for the blocks below that own their data (see the helper). */
const sharedServer = sharedTestServer();

// ─── was __tests__/integration/rest-orders.test.ts ───
describe('rest-orders', () => {
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
      server = await sharedServer();
      ({ alice, bob, carol } = await server.users());
    });

    const call = (method: string, path: string, opts: Parameters<typeof rest>[3] = {}) =>
      rest(server.url, method, path, opts);
    const create = async (token: string, items = [{ sku: 'KB-001', qty: 1 }]) => {
      const res = await call('POST', '/orders', {
        token,
        body: { items },
        headers: { 'idempotency-key': randomUUID() },
      });
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
        await call('PUT', `/orders/${order.id}`, {
          token: alice,
          body: { items: [{ sku: 'KB-001', qty: 1 }] },
          headers,
        }),
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
});

// ─── was __tests__/integration/rest-contract.test.ts ───
describe('rest-contract', () => {
  interface OrderBody {
    id: string;
    status: string;
    total_cents: number;
  }

  /** Points each user may spend here: alice's and carol's scenario stay under it, bob spends it all. */
  const BUDGET = 700;
  const WRITE_PRICE = 10;

  /**
   * The REST scenario — create, read, HEAD, list pages, conditional GET, conditional writes, PUT, DELETE, idempotent
   * replay and every refusal — with each answer checked against the document the service serves (and, for an operation
   * that existed at release, against openapi.released.json too: helpers/openapi.ts): its status must be
   * declared for the operation, each header declared (required ones present, values valid) and none undeclared, and
   * its body valid for its media type. Responses the document declares but this scenario never receives fail the
   * block once all its tests have run (in whatever order), unless they are listed there with the reason they cannot be
   * driven from outside.
   */
  describe('every REST answer is one the served OpenAPI document describes', () => {
    /** The scenario's tests: how many there are, and how many have passed (the coverage check needs them all). */
    let declared = 0;
    let passed = 0;
    const scenario = (name: string, fn: () => void | Promise<void>) => {
      declared++;
      test(name, async () => {
        await fn();
        passed++;
      });
    };
    let server: TestServer;
    let contract: ResponseValidator;
    let alice: string;
    let bob: string;
    let carol: string;
    /** alice with orders:read only, and with no orders scope at all. */
    let aliceReads: string;
    let aliceNoScope: string;
    const call = (method: string, path: string, opts: RestOptions = {}) =>
      rest(server.url, method, path, opts, contract);
    const problem = async (
      pending: ReturnType<typeof call>,
      status: number,
      code: string,
    ): Promise<{ body: Problem; headers: Headers }> => {
      const res = await pending;
      assert.equal(res.status, status, res.text);
      assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
      assert.equal(res.headers.get('cache-control'), 'no-store');
      if (res.text === '') return { body: { status, code } as Problem, headers: res.headers }; // HEAD
      const body = res.json<Problem>();
      assert.equal(body.code, code);
      assert.equal(body.status, status);
      return { body, headers: res.headers };
    };
    const keyed = (key = randomUUID()) => ({ 'idempotency-key': key });
    const ITEMS = [{ sku: 'KB-001', qty: 1 }];

    /** alice's order that no test changes: reads, refusals and answers that come before any effect use it. */
    let order: OrderBody;
    let etag: string;
    /** A new order of alice's, for a test that changes or deletes it. */
    const newOrder = async (): Promise<{ order: OrderBody; etag: string }> => {
      const created = await call('POST', '/orders', { token: alice, body: { items: ITEMS }, headers: keyed() });
      assert.equal(created.status, 201, created.text);
      return { order: created.json<OrderBody>(), etag: created.headers.get('etag')! };
    };

    beforeAll(async () => {
      server = await startTestServer({ RATE_LIMIT_POINTS: String(BUDGET) });
      ({ alice, bob, carol } = await server.users());
      const issuer = server.running.app.issuer;
      const login = (scope: string) =>
        loginWithPkce({ issuer, username: 'alice', password: 'alice', scope }).then((t) => t.accessToken);
      [aliceReads, aliceNoScope] = await Promise.all([login('openid orders:read'), login('openid')]);
      contract = responseValidator((await server.http.get('/v1/openapi.json')).body as Record<string, unknown>);
      ({ order, etag } = await newOrder());
    });
    afterAll(() => server.close());

    /** A token of a customer no other test is (a new subject), signed with the embedded issuer's key. */
    const newCustomer = () =>
      idpSignedToken(server, { sub: `customer-${randomUUID()}`, expiresIn: 300, claims: { name: 'Spender' } });

    scenario(
      'the served document is valid OpenAPI 3.1, is the one the code generates, and builds the validator',
      async () => {
        const served = await server.http.get('/v1/openapi.json');
        assert.equal(served.status, 200);
        assert.equal(served.headers['content-type'], 'application/json; charset=utf-8');
        const result = await new Validator().validate(served.body as Record<string, unknown>);
        assert.equal(result.valid, true, JSON.stringify(result.errors));
        assert.deepEqual(served.body, JSON.parse(JSON.stringify(openapiDocument)));
      },
    );

    /** One well-formed request of each operation on the scenario's order, without credentials. */
    const everyOperation = (): [string, string, RestOptions][] => [
      ['GET', '/orders', {}],
      ['POST', '/orders', { body: { items: ITEMS }, headers: keyed() }],
      ['GET', `/orders/${order.id}`, {}],
      ['HEAD', `/orders/${order.id}`, {}],
      ['PATCH', `/orders/${order.id}`, { body: { status: 'cancelled' }, headers: { 'if-match': etag } }],
      ['PUT', `/orders/${order.id}`, { body: { items: ITEMS }, headers: { 'if-match': etag } }],
      ['DELETE', `/orders/${order.id}`, {}],
    ];

    scenario(
      'POST creates (201, Location, ETag); the same key and body replay it; another body under it is 422',
      async () => {
        const key = randomUUID();
        const created = await call('POST', '/orders', { token: alice, body: { items: ITEMS }, headers: keyed(key) });
        assert.equal(created.status, 201, created.text);
        const { id } = created.json<OrderBody>();
        assert.equal(created.headers.get('location'), `/v1/orders/${id}`);
        assert.equal(created.headers.get('idempotent-replayed'), null);
        assert.equal(created.headers.get('ratelimit-policy'), `"orders";q=${BUDGET};w=3600`);

        const replay = await call('POST', '/orders', { token: alice, body: { items: ITEMS }, headers: keyed(key) });
        assert.equal(replay.status, 201);
        assert.equal(replay.headers.get('idempotent-replayed'), 'true');
        assert.equal(replay.text, created.text);

        const other = { items: [{ sku: 'KB-001', qty: 2 }] };
        await problem(
          call('POST', '/orders', { token: alice, body: other, headers: keyed(key) }),
          422,
          'IDEMPOTENCY_KEY_REUSED',
        );
      },
    );

    scenario(
      'POST refusals: no key 400, bad JSON 400, a field invalid 422, text/plain 415, too large 413, Accept 406, 403',
      async () => {
        const body = { items: ITEMS };
        await problem(call('POST', '/orders', { token: alice, body }), 400, 'IDEMPOTENCY_KEY_REQUIRED');
        await problem(
          call('POST', '/orders', { token: alice, raw: '{"items":', headers: keyed() }),
          400,
          'MALFORMED_REQUEST',
        );
        const invalid = await problem(
          call('POST', '/orders', { token: alice, body: { items: [{ sku: 'NOPE', qty: 0 }] }, headers: keyed() }),
          422,
          'BAD_USER_INPUT',
        );
        assert.deepEqual(invalid.body.errors?.map((e) => e.pointer).sort(), ['/items/0/qty', '/items/0/sku']);
        const text = await problem(
          call('POST', '/orders', {
            token: alice,
            raw: JSON.stringify(body),
            headers: { ...keyed(), 'content-type': 'text/plain' },
          }),
          415,
          'UNSUPPORTED_MEDIA_TYPE',
        );
        assert.equal(text.headers.get('accept-post'), 'application/json');
        const zstd = await problem(
          call('POST', '/orders', {
            token: alice,
            raw: JSON.stringify(body),
            headers: { ...keyed(), 'content-encoding': 'zstd' },
          }),
          415,
          'UNSUPPORTED_MEDIA_TYPE',
        );
        assert.equal(zstd.headers.get('accept-encoding'), 'gzip, deflate, br');
        const large = JSON.stringify({ items: ITEMS, pad: 'x'.repeat(70_000) });
        await problem(
          call('POST', '/orders', { token: alice, raw: large, headers: keyed() }),
          413,
          'PAYLOAD_TOO_LARGE',
        );
        await problem(
          call('POST', '/orders', { token: alice, body, headers: { ...keyed(), accept: 'application/xml' } }),
          406,
          'NOT_ACCEPTABLE',
        );
        await problem(
          call('POST', '/orders', { token: aliceReads, body, headers: keyed() }),
          403,
          'INSUFFICIENT_SCOPE',
        );
        const forOther = { ...body, customer_id: 'cus_00000000000000000000000000' };
        await problem(call('POST', '/orders', { token: alice, body: forOther, headers: keyed() }), 403, 'FORBIDDEN');
      },
    );

    scenario(
      'GET and HEAD one order: 200 with ETag, 304 on If-None-Match (strong or weak), HEAD without a body',
      async () => {
        const got = await call('GET', `/orders/${order.id}`, { token: alice });
        assert.equal(got.status, 200);
        assert.equal(got.headers.get('etag'), etag);
        assert.equal(got.headers.get('cache-control'), 'private, no-cache');
        assert.equal(got.headers.get('vary'), 'Authorization');
        for (const method of ['GET', 'HEAD']) {
          for (const tag of [etag, `W/${etag}`]) {
            const cached = await call(method, `/orders/${order.id}`, {
              token: alice,
              headers: { 'if-none-match': tag },
            });
            assert.equal(cached.status, 304, `${method} If-None-Match: ${tag}`);
            assert.equal(cached.headers.get('etag'), etag);
          }
        }
        const head = await call('HEAD', `/orders/${order.id}`, { token: alice });
        assert.equal(head.status, 200);
        assert.equal(head.headers.get('etag'), etag);
        assert.equal(head.headers.get('content-type'), 'application/json; charset=utf-8');
      },
    );

    scenario(
      'the check bites: a declared header with a wrong value fails against the served and the released document; an undeclared one fails against the served',
      async () => {
        const url = `${server.url}/v1/orders/${order.id}`;
        const got = await call('GET', `/orders/${order.id}`, { token: alice });
        assert.equal(got.status, 200);
        const wrongTag = new Headers(got.headers);
        wrongTag.set('etag', 'W/"not-an-order"');
        for (const [name, validator] of [
          ['served', contract],
          ['released', releasedContract],
        ] as const) {
          assert.doesNotThrow(() => validator.check('GET', url, got, got.text), name);
          assert.throws(
            () => validator.check('GET', url, { status: 200, headers: wrongTag }, got.text),
            { name: 'AssertionError', message: /^GET \/orders\/\{id\} → 200: header ETag: W\/"not-an-order" / },
            name,
          );
        }
        const undeclared = new Headers(got.headers);
        undeclared.set('x-undeclared', '1');
        assert.throws(() => contract.check('GET', url, { status: 200, headers: undeclared }, got.text), {
          name: 'AssertionError',
          message: /^GET \/orders\/\{id\} → 200: headers the document does not declare/,
        });
      },
    );

    scenario(
      'GET and HEAD refusals: a malformed id 400, unknown or not yours 404, Accept 406, no order scope 403',
      async () => {
        for (const method of ['GET', 'HEAD']) {
          const malformed = await problem(call(method, '/orders/%ZZ', { token: alice }), 400, 'MALFORMED_REQUEST');
          if (method === 'GET') assert.equal(malformed.body.instance, '/v1/orders/%25ZZ');
          await problem(call(method, '/orders/ord_00000000000000000000000000', { token: alice }), 404, 'NOT_FOUND');
          await problem(call(method, `/orders/${order.id}`, { token: bob }), 404, 'NOT_FOUND');
          await problem(
            call(method, `/orders/${order.id}`, { token: alice, headers: { accept: 'text/html' } }),
            406,
            'NOT_ACCEPTABLE',
          );
          const scope = await problem(
            call(method, `/orders/${order.id}`, { token: aliceNoScope }),
            403,
            'INSUFFICIENT_SCOPE',
          );
          assert.match(scope.headers.get('www-authenticate')!, /error="insufficient_scope"/);
        }
      },
    );

    scenario(
      'credentials: none is 401 after the budget is charged; a bad token is 401 before it, on every operation',
      async () => {
        for (const [method, path, opts] of everyOperation()) {
          const anonymous = await problem(call(method, path, opts), 401, 'UNAUTHENTICATED');
          assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer realm="orders-api"');
          assert.match(anonymous.headers.get('ratelimit')!, /^"orders";r=\d+;t=\d+$/);
          const refused = await problem(call(method, path, { ...opts, token: 'not.a.token' }), 401, 'UNAUTHENTICATED');
          assert.match(refused.headers.get('www-authenticate')!, /^Bearer realm="orders-api", error="invalid_token"/);
          assert.equal(refused.headers.get('ratelimit'), null, `${method}: refused before the budget is charged`);
        }
      },
    );

    scenario(
      'list pages: Link rel=next and next_cursor, the last page without them; a bad limit or cursor is 400',
      async () => {
        for (let i = 0; i < 2; i++) {
          const res = await call('POST', '/orders', { token: alice, body: { items: ITEMS }, headers: keyed() });
          assert.equal(res.status, 201);
        }
        const first = await call('GET', '/orders?limit=2', { token: alice });
        assert.equal(first.status, 200);
        assert.equal(first.headers.get('cache-control'), 'private, no-cache');
        const page = first.json<{ orders: OrderBody[]; next_cursor: string | null }>();
        assert.equal(page.orders.length, 2);
        assert.ok(page.next_cursor);
        assert.equal(first.headers.get('link'), `</v1/orders?limit=2&cursor=${page.next_cursor}>; rel="next"`);
        // Follow the pages to the end: the last one has neither a cursor nor a Link rel="next"; each links back (prev).
        let cursor: string | null = page.next_cursor;
        for (let pages = 1; cursor; pages++) {
          assert.ok(pages < 50, 'the pages end');
          const next = await call('GET', `/orders?limit=20&cursor=${cursor}`, { token: alice });
          assert.equal(next.status, 200);
          cursor = next.json<{ next_cursor: string | null }>().next_cursor;
          const link = next.headers.get('link') ?? '';
          assert.equal(link.includes('rel="next"'), cursor !== null);
          assert.equal(link.includes('rel="prev"'), true);
        }
        const capped = await call('GET', '/orders?limit=1000', { token: carol });
        assert.ok(capped.json<{ orders: unknown[] }>().orders.length <= 100);

        await problem(call('GET', '/orders?limit=0', { token: alice }), 400, 'MALFORMED_REQUEST');
        const tampered = await problem(call('GET', '/orders?cursor={x}', { token: alice }), 400, 'MALFORMED_REQUEST');
        assert.equal(tampered.body.instance, '/v1/orders', 'the query is not echoed');
        await problem(call('GET', '/orders', { token: alice, headers: { accept: 'text/csv' } }), 406, 'NOT_ACCEPTABLE');
        await problem(call('GET', '/orders', { token: aliceNoScope }), 403, 'INSUFFICIENT_SCOPE');
      },
    );

    /** PATCH and PUT: the body each sends, one that is invalid, and the header a 415 names the media types in. */
    const CONDITIONAL_WRITES = [
      {
        method: 'PATCH',
        body: { status: 'cancelled' },
        invalid: { status: 'lost' },
        accepts: ['accept-patch', 'application/merge-patch+json, application/json'],
      },
      {
        method: 'PUT',
        body: { items: [{ sku: 'KB-001', qty: 3 }] },
        invalid: { items: [] },
        accepts: ['accept', 'application/json'],
      },
    ] as const;

    for (const { method, body, invalid, accepts } of CONDITIONAL_WRITES) {
      scenario(
        `${method} refusals: 428 without If-Match, 412 stale or weak, 412 If-None-Match: * or current, 400 malformed, 415, 422, 413, 406, 403, 404`,
        async () => {
          const path = `/orders/${order.id}`;
          const at = (ifMatch: string, more: RestOptions = {}): RestOptions => ({
            token: alice,
            body,
            ...more,
            headers: { 'if-match': ifMatch, ...more.headers },
          });
          await problem(call(method, path, { token: alice, body }), 428, 'PRECONDITION_REQUIRED');
          for (const stale of [`"${order.id}.v9"`, `W/${etag}`]) {
            await problem(call(method, path, at(stale)), 412, 'PRECONDITION_FAILED');
          }
          await problem(call(method, path, at('"x')), 400, 'MALFORMED_REQUEST');
          // If-None-Match is evaluated before any method (RFC 9110 §13.1.2): * or the current tag (weakly) fails.
          for (const noneMatch of ['*', etag, `W/${etag}`, `"other", ${etag}`]) {
            const failed = await problem(
              call(method, path, at(etag, { headers: { 'if-none-match': noneMatch } })),
              412,
              'PRECONDITION_FAILED',
            );
            assert.match(failed.body.detail, /If-None-Match excludes/);
          }
          await problem(call(method, path, at(etag, { headers: { 'if-none-match': 'x' } })), 400, 'MALFORMED_REQUEST');
          const text = { raw: JSON.stringify(body), headers: { 'content-type': 'text/plain' } };
          const wrongType = await problem(call(method, path, at(etag, text)), 415, 'UNSUPPORTED_MEDIA_TYPE');
          assert.equal(wrongType.headers.get(accepts[0]), accepts[1]);
          const coding = { raw: JSON.stringify(body), headers: { 'content-encoding': 'zstd' } };
          const wrongCoding = await problem(call(method, path, at(etag, coding)), 415, 'UNSUPPORTED_MEDIA_TYPE');
          assert.equal(wrongCoding.headers.get('accept-encoding'), 'gzip, deflate, br');
          await problem(call(method, path, at(etag, { body: invalid })), 422, 'BAD_USER_INPUT');
          const large = JSON.stringify({ ...body, pad: 'x'.repeat(70_000) });
          await problem(call(method, path, at(etag, { raw: large })), 413, 'PAYLOAD_TOO_LARGE');
          await problem(call(method, path, at(etag, { headers: { accept: 'image/png' } })), 406, 'NOT_ACCEPTABLE');
          await problem(call(method, path, at(etag, { token: aliceReads })), 403, 'INSUFFICIENT_SCOPE');
          await problem(call(method, path, at(etag, { token: bob })), 404, 'NOT_FOUND');
        },
      );
    }

    scenario(
      'PATCH follows the lifecycle (409) and the roles (403); PUT and PATCH with If-Match are 200; PUT then 409',
      async () => {
        const mine = await newOrder();
        const path = `/orders/${mine.order.id}`;
        let { etag } = mine;
        const patch = (token: string, status: string) =>
          call('PATCH', path, { token, body: { status }, headers: { 'if-match': etag } });
        await problem(patch(carol, 'delivered'), 409, 'INVALID_TRANSITION');
        await problem(patch(alice, 'paid'), 403, 'FORBIDDEN');

        const body = { items: [{ sku: 'KB-001', qty: 3 }] };
        // An If-None-Match that names another version holds.
        const replaced = await call('PUT', path, {
          token: alice,
          body,
          headers: { 'if-match': etag, 'if-none-match': `"${mine.order.id}.v999"` },
        });
        assert.equal(replaced.status, 200, replaced.text);
        assert.equal(replaced.json<OrderBody>().total_cents, 3 * 8900);
        etag = replaced.headers.get('etag')!;
        const cancelled = await patch(alice, 'cancelled');
        assert.equal(cancelled.status, 200, cancelled.text);
        assert.equal(cancelled.json<OrderBody>().status, 'cancelled');
        etag = cancelled.headers.get('etag')!;
        await problem(call('PUT', path, { token: alice, body, headers: { 'if-match': etag } }), 409, 'NOT_EDITABLE');
      },
    );

    scenario(
      'DELETE: staff only (403), 412 on a stale If-Match or If-None-Match: *, 400 on a malformed one, 204, then 404',
      async () => {
        const { order, etag } = await newOrder();
        const path = `/orders/${order.id}`;
        await problem(call('DELETE', path, { token: alice }), 403, 'FORBIDDEN');
        await problem(
          call('DELETE', path, { token: carol, headers: { 'if-match': `"${order.id}.v9"` } }),
          412,
          'PRECONDITION_FAILED',
        );
        await problem(
          call('DELETE', path, { token: carol, headers: { 'if-match': 'nope' } }),
          400,
          'MALFORMED_REQUEST',
        );
        for (const noneMatch of ['*', etag]) {
          await problem(
            call('DELETE', path, { token: carol, headers: { 'if-none-match': noneMatch } }),
            412,
            'PRECONDITION_FAILED',
          );
        }
        const deleted = await call('DELETE', path, { token: carol, headers: { 'if-match': etag } });
        assert.equal(deleted.status, 204);
        assert.equal(deleted.text, '');
        assert.equal(deleted.headers.get('cache-control'), 'no-store');
        await problem(call('DELETE', path, { token: carol }), 404, 'NOT_FOUND');
      },
    );

    scenario('a wrong method is 405 naming the documented ones, and OPTIONS names them with 204', async () => {
      const wrong = await call('POST', `/orders/${order.id}`, { token: alice, body: {} });
      assert.equal(wrong.status, 405);
      const options = await call('OPTIONS', '/orders', { token: alice });
      assert.equal(options.status, 204);
    });

    scenario(
      'a spent budget is 429 with Retry-After and the RateLimit fields on every operation, HEAD included',
      async () => {
        // A customer of this test's own spends what is left of their budget at once: as many concurrent writes as it
        // pays for, and five more (bob's and alice's budgets stay for the other tests, whatever their order).
        const spender = await newCustomer();
        const before = await call('GET', '/orders', { token: spender });
        const left = Number(/;r=(\d+);/.exec(before.headers.get('ratelimit')!)![1]);
        const affordable = Math.floor(left / WRITE_PRICE);
        const spend = await Promise.all(
          Array.from({ length: affordable + 5 }, () =>
            call('DELETE', '/orders/ord_00000000000000000000000000', { token: spender }),
          ),
        );
        const statuses = spend.map((r) => r.status);
        assert.equal(statuses.filter((s) => s === 429).length, 5, String(statuses));
        assert.equal(statuses.filter((s) => s === 404).length, affordable, String(statuses));
        // What is left buys reads (1 point each): exactly that many, and then none.
        const reads = await Promise.all(
          Array.from({ length: (left % WRITE_PRICE) + 1 }, () => call('GET', '/orders?limit=1', { token: spender })),
        );
        assert.deepEqual(reads.map((r) => r.status).sort(), [...Array(left % WRITE_PRICE).fill(200), 429]);
        for (const [method, path, opts] of everyOperation()) {
          const limited = await problem(call(method, path, { ...opts, token: spender }), 429, 'RATE_LIMITED');
          assert.match(limited.headers.get('retry-after')!, /^\d+$/);
          assert.match(limited.headers.get('ratelimit')!, /^"orders";r=0;t=\d+$/);
        }
      },
    );

    /** Answers that need a failing dependency, a request still in flight, or data older than this code. */
    const UNDRIVABLE = new Map([
      ['500', 'a failure on our side (the last-resort handler has tests of its own)'],
      ['503', 'a dependency that is down: npm run test:faults'],
      [
        'POST /orders 409',
        'IDEMPOTENCY_KEY_IN_USE needs a second request while the first holds the key: rest-concurrency',
      ],
      [
        'POST /orders 404',
        'the replay of a key whose record predates keeping the first answer, and whose order is gone',
      ],
    ]);
    const ordersResponses = () => contract.documented().filter((r) => / \/orders(\/\{id\})? /.test(r));

    scenario('each response exempted from the check below is one the document declares for /orders', () => {
      const documented = ordersResponses();
      const stale = [...UNDRIVABLE.keys()].filter((key) => !documented.some((r) => r === key || r.endsWith(` ${key}`)));
      assert.deepEqual(stale, []);
    });

    // Every response the document declares for /orders was received, but for those no client can cause: checked once
    // every test of the scenario has passed, whatever their order (not when -t runs some of them, or one failed).
    afterAll(() => {
      if (passed < declared) return;
      const driven = ordersResponses();
      const missing = driven.filter(
        (r) => !contract.seen().has(r) && !UNDRIVABLE.has(r) && !UNDRIVABLE.has(r.split(' ').at(-1)!),
      );
      assert.deepEqual(missing, []);
    });
  });
});

// ─── was __tests__/integration/rest-hostile-input.test.ts ───
describe('rest-hostile-input', () => {
  const ORDER = JSON.stringify({ items: [{ sku: 'TB-017', qty: 1 }] });
  const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const SOME_ID = 'ord_01m7w23sp9rf7e0qq21928bz5d';

  /** Sends bytes as they are: superagent would otherwise JSON-serialise a Buffer sent with a JSON content type. */
  const sendRaw = (req: request.Test, body: Buffer) => req.serialize(() => body as unknown as string).send(body);

  /** A 4xx answer as RFC 9457 problem details of the given type: never a 500, never another format. */
  function assertProblem(res: request.Response, status: number, slug: string) {
    assert.equal(res.status, status, res.text);
    assert.match(res.headers['content-type'] ?? '', /^application\/problem\+json/);
    const body = JSON.parse(res.text) as Problem;
    assert.equal(body.status, status);
    assert.equal(body.type, `/problems/${slug}`);
    assert.ok(body.title && body.detail && body.instance && body.code, res.text);
    return body;
  }

  describe('hostile input to REST answers 4xx problem details, never 500', () => {
    let server: TestServer;
    let alice: string;
    let carol: string;
    let orderId: string;
    beforeAll(async () => {
      server = await sharedServer();
      ({ alice, carol } = await server.users());
      const res = await request(server.url)
        .post('/v1/orders')
        .set('authorization', `Bearer ${alice}`)
        .set('idempotency-key', randomUUID())
        .set('content-type', 'application/json')
        .send(ORDER)
        .expect(201);
      orderId = (res.body as { id: string }).id;
    });

    const list = (cursor: string) =>
      request(server.url).get('/v1/orders').query({ cursor }).set('authorization', `Bearer ${alice}`);

    for (const [label, cursor] of [
      ['a BC-era date', cursorOf(['-000100-01-01T00:00:00.000Z', SOME_ID])],
      ['year 0', cursorOf(['0000-01-01T00:00:00.000Z', SOME_ID])],
      ['the last date JavaScript knows', cursorOf(['+275760-09-13T00:00:00.000Z', SOME_ID])],
      ['a NUL byte in the id', cursorOf(['2024-01-01T00:00:00.000Z', 'ord_\u0000'])],
      ['a NUL byte in the date', cursorOf(['2024-01-01\u0000', SOME_ID])],
      ['a lone surrogate as id', cursorOf(['2024-01-01T00:00:00.000Z', '\ud800'])],
      ['a date in another format', cursorOf(['Tue Mar 01 2024', SOME_ID])],
      ['a number as date', cursorOf([1e20, SOME_ID])],
      ['a customer id', cursorOf(['2024-01-01T00:00:00.000Z', 'cus_01m7w23sp9rf7e0qq21928bz5d'])],
      ['three members', cursorOf(['2024-01-01T00:00:00.000Z', SOME_ID, 1])],
      [
        'invalid UTF-8',
        Buffer.from([0x5b, 0x22, 0xff, 0xfe, 0x22, 0x2c, 0x22, 0x61, 0x22, 0x5d]).toString('base64url'),
      ],
      ['not base64url JSON', '%%%'],
      ['an overlong cursor', cursorOf(['2024-01-01T00:00:00.000Z', 'x'.repeat(2000)])],
    ] as const) {
      test(`a tampered list cursor holding ${label} is 400 malformed-request`, async () => {
        const body = assertProblem(await list(cursor), 400, 'malformed-request');
        assert.equal(body.code, 'MALFORMED_REQUEST');
      });
    }

    test('a cursor the API issued keeps working', async () => {
      const first = await request(server.url)
        .get('/v1/orders')
        .query({ limit: 1 })
        .set('authorization', `Bearer ${carol}`)
        .expect(200);
      const next = (first.body as { next_cursor: string }).next_cursor;
      assert.ok(next);
      await list(next).expect(200);
    });

    const corrupt: [string, Buffer][] = [
      ['gzip', Buffer.from('this is not gzip data')],
      ['deflate', Buffer.from('this is not deflate data')],
      ['br', Buffer.from('this is not brotli data at all')],
      ['gzip', gzipSync(ORDER).subarray(0, 12)],
    ];
    for (const [encoding, body] of corrupt) {
      test(`a corrupt ${encoding} body (${body.length} bytes) on POST, PUT and PATCH is 400 malformed-request`, async () => {
        const auth = `Bearer ${carol}`;
        const requests = [
          request(server.url).post('/v1/orders').set('idempotency-key', randomUUID()).type('json'),
          request(server.url).put(`/v1/orders/${orderId}`).set('if-match', '*').type('json'),
          request(server.url).patch(`/v1/orders/${orderId}`).set('if-match', '*').type('application/merge-patch+json'),
        ];
        for (const req of requests) {
          const res = await sendRaw(req.set('authorization', auth).set('content-encoding', encoding), body);
          const problem = assertProblem(res, 400, 'malformed-request');
          assert.match(problem.detail, /Content-Encoding/);
        }
      });
    }

    for (const [encoding, compress] of [
      ['gzip', gzipSync],
      ['deflate', deflateSync],
      ['br', brotliCompressSync],
    ] as const) {
      test(`a well-formed ${encoding} body still creates an order`, async () => {
        const req = request(server.url)
          .post('/v1/orders')
          .set('authorization', `Bearer ${alice}`)
          .set('idempotency-key', randomUUID())
          .set('content-type', 'application/json')
          .set('content-encoding', encoding);
        await sendRaw(req, compress(Buffer.from(ORDER))).expect(201);
      });
    }

    // RFC 9110 §15.5.16: a content coding the server does not read is 415, and Accept-Encoding names those it does.
    for (const [coding, body] of [
      ['zstd', zstdCompressSync(Buffer.from(ORDER))],
      ['ZSTD', zstdCompressSync(Buffer.from(ORDER))],
      ['compress', Buffer.from(ORDER)],
      ['gzip, br', brotliCompressSync(gzipSync(ORDER))],
    ] as const) {
      test(`a body in Content-Encoding: ${coding} on POST, PUT and PATCH is 415 naming gzip, deflate, br; 8 at once too`, async () => {
        const auth = `Bearer ${carol}`;
        const requests = () => [
          request(server.url).post('/v1/orders').set('idempotency-key', randomUUID()).type('json'),
          request(server.url).put(`/v1/orders/${orderId}`).set('if-match', '*').type('json'),
          request(server.url).patch(`/v1/orders/${orderId}`).set('if-match', '*').type('application/merge-patch+json'),
        ];
        const answers = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            sendRaw(requests()[i % 3]!.set('authorization', auth).set('content-encoding', coding), body),
          ),
        );
        for (const res of answers) {
          const problem = assertProblem(res, 415, 'unsupported-media-type');
          assert.equal(res.headers['accept-encoding'], 'gzip, deflate, br');
          assert.equal(
            problem.detail,
            "The body's Content-Encoding is not one this server reads: send it without one, or as gzip, deflate, br.",
          );
        }
      });
    }

    test('Content-Encoding: identity is read as no coding', async () => {
      const req = request(server.url)
        .post('/v1/orders')
        .set('authorization', `Bearer ${alice}`)
        .set('idempotency-key', randomUUID())
        .set('content-type', 'application/json')
        .set('content-encoding', 'identity');
      await sendRaw(req, Buffer.from(ORDER)).expect(201);
    });

    for (const path of ['/v1/orders/%FF%FE', '/v1/orders/%ED%A0%80', '/v1/orders/%E0%A4%A', '/problems/%FF']) {
      test(`a path that is not percent-encoded UTF-8 (${path}) is 400 malformed-request`, async () => {
        assertProblem(
          await request(server.url).get(path).set('authorization', `Bearer ${alice}`),
          400,
          'malformed-request',
        );
      });
    }

    test('a 422 lists the first 20 invalid members and counts the rest, so it stays smaller than the request', async () => {
      const members = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`m${i}`, 1]));
      const sent = JSON.stringify({ ...members, items: [{ sku: 'TB-017', qty: 1 }] });
      const res = await request(server.url)
        .post('/v1/orders')
        .set('authorization', `Bearer ${alice}`)
        .set('idempotency-key', randomUUID())
        .type('json')
        .send(sent);
      const problem = assertProblem(res, 422, 'invalid-input');
      assert.equal(problem.errors!.length, 20);
      assert.deepEqual(problem.errors![0], { pointer: '/m0', reason: 'is not a member of this resource' });
      assert.match(problem.detail, /^3000 fields are invalid; the first 20 are listed\.$/);
      assert.ok(res.text.length < sent.length, `${res.text.length} bytes answer ${sent.length}`);
    });

    test('a body that is JSON but not an object is a 422 that names the body, not an empty pointer', async () => {
      const res = await request(server.url)
        .post('/v1/orders')
        .set('authorization', `Bearer ${alice}`)
        .set('idempotency-key', randomUUID())
        .type('json')
        .send('[1, 2]');
      const problem = assertProblem(res, 422, 'invalid-input');
      assert.equal(problem.detail, 'the body: must be a JSON object');
      assert.deepEqual(problem.errors, [{ pointer: '', reason: 'must be a JSON object' }]);
    });

    test('a 422 with many invalid lines is capped the same way', async () => {
      const items = Array.from({ length: 1000 }, () => ({ sku: 5, qty: 'x', extra: true }));
      const res = await request(server.url)
        .post('/v1/orders')
        .set('authorization', `Bearer ${alice}`)
        .set('idempotency-key', randomUUID())
        .send({ items });
      const problem = assertProblem(res, 422, 'invalid-input');
      assert.equal(problem.errors!.length, 20);
      assert.match(problem.detail, /^\d{4} fields are invalid; the first 20 are listed\.$/);
    });

    for (const [label, body, status, slug] of [
      ['qty 1e400', '{"items":[{"sku":"TB-017","qty":1e400}]}', 422, 'invalid-input'],
      ['qty 2^53+', '{"items":[{"sku":"TB-017","qty":99999999999999999999999}]}', 422, 'invalid-input'],
      ['qty NaN', '{"items":[{"sku":"TB-017","qty":NaN}]}', 400, 'malformed-request'],
      ['qty "NaN"', '{"items":[{"sku":"TB-017","qty":"NaN"}]}', 422, 'invalid-input'],
      ['qty -0', '{"items":[{"sku":"TB-017","qty":-0}]}', 422, 'invalid-input'],
      ['5000-deep arrays', '['.repeat(5000) + ']'.repeat(5000), 422, 'invalid-input'],
      ['5000-deep objects', '{"a":'.repeat(5000) + '1' + '}'.repeat(5000), 422, 'invalid-input'],
      ['a NUL in a SKU', '{"items":[{"sku":"TB\\u0000","qty":1}]}', 422, 'invalid-input'],
      ['a lone surrogate in a SKU', '{"items":[{"sku":"\\ud800","qty":1}]}', 422, 'invalid-input'],
    ] as const) {
      test(`POST /v1/orders with ${label} is ${status} ${slug}`, async () => {
        const res = await request(server.url)
          .post('/v1/orders')
          .set('authorization', `Bearer ${alice}`)
          .set('idempotency-key', randomUUID())
          .type('json')
          .send(body);
        assertProblem(res, status, slug);
      });
    }

    test('POST /v1/orders with invalid UTF-8 in a string is 422, not 500', async () => {
      const req = request(server.url)
        .post('/v1/orders')
        .set('authorization', `Bearer ${alice}`)
        .set('idempotency-key', randomUUID())
        .type('json');
      const body = Buffer.concat([
        Buffer.from('{"items":[{"sku":"'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('","qty":1}]}'),
      ]);
      const res = await sendRaw(req, body);
      assertProblem(res, 422, 'invalid-input');
    });

    for (const [method, type] of [
      ['POST', 'application/json'],
      ['PATCH', 'application/merge-patch+json'],
      ['PATCH', 'application/json'],
      ['PUT', 'application/json'],
    ] as const) {
      test(`${method} with an empty ${type} body is 400 malformed-request, not read as {}`, async () => {
        const path = method === 'POST' ? '/v1/orders' : `/v1/orders/${orderId}`;
        const agent = request(server.url);
        const start = method === 'POST' ? agent.post(path) : method === 'PATCH' ? agent.patch(path) : agent.put(path);
        const req = start
          .set('authorization', `Bearer ${alice}`)
          .set('idempotency-key', randomUUID())
          .set('if-match', '*')
          .set('content-type', type);
        const body = assertProblem(await sendRaw(req, Buffer.alloc(0)), 400, 'malformed-request');
        assert.equal(body.detail, 'The body is not valid JSON.');
      });
    }

    for (const charset of ['utf-16', 'UTF-16LE', 'utf-32', 'utf8', 'latin1', 'iso-8859-1', 'us-ascii']) {
      test(`a JSON body declared as charset=${charset} is 415 unsupported-media-type, whatever its bytes`, async () => {
        const req = request(server.url)
          .post('/v1/orders')
          .set('authorization', `Bearer ${alice}`)
          .set('idempotency-key', randomUUID())
          .set('content-type', `application/json; charset=${charset}`);
        const body = assertProblem(await sendRaw(req, Buffer.from(ORDER)), 415, 'unsupported-media-type');
        assert.equal(body.detail, 'Send the body as UTF-8 JSON, without content encoding or as gzip, deflate or br.');
      });
    }

    for (const charset of ['utf-8', 'UTF-8', '"utf-8"']) {
      test(`a JSON body declared as charset=${charset} is read`, async () => {
        const req = request(server.url)
          .post('/v1/orders')
          .set('authorization', `Bearer ${alice}`)
          .set('idempotency-key', randomUUID())
          .set('content-type', `application/json; charset=${charset}`);
        const res = await sendRaw(req, Buffer.from(ORDER));
        assert.equal(res.status, 201, res.text);
      });
    }

    for (const limit of ['0x10', '1e2', '1.5', ' 5', '']) {
      test(`limit=${JSON.stringify(limit)} is 400 malformed-request`, async () => {
        const res = await request(server.url)
          .get('/v1/orders')
          .query({ limit })
          .set('authorization', `Bearer ${alice}`);
        assertProblem(res, 400, 'malformed-request');
      });
    }
  });
});

// ─── was __tests__/integration/rest-idempotency.test.ts ───
describe('rest-idempotency', () => {
  const items = [{ sku: 'DL-009', qty: 2 }];

  describe('Idempotency-Key on order creation', () => {
    let server: TestServer;
    let alice: string;
    let bob: string;
    beforeAll(async () => {
      server = await sharedServer();
      [alice, bob] = await Promise.all([server.token('alice'), server.token('bob')]);
    });

    const post = (token: string, key: string | undefined, body: unknown = { items }) =>
      rest(server.url, 'POST', '/orders', {
        token,
        body,
        headers: key === undefined ? {} : { 'idempotency-key': key },
      });
    const countOrders = async (key: string) =>
      (
        await server.running.app.db.query<{ n: number }>(
          `select count(*)::int as n from orders o join idempotency_keys k on k.order_id = o.id where k.key = $1`,
          [key],
        )
      )[0]!.n;

    test('the same key and body replays the original status, headers and body byte for byte', async () => {
      const key = randomUUID();
      const first = await post(alice, key);
      assert.equal(first.status, 201);
      const again = await post(alice, key);
      assert.equal(again.status, 201);
      assert.equal(again.text, first.text);
      for (const h of ['location', 'etag', 'content-type', 'cache-control'])
        assert.equal(again.headers.get(h), first.headers.get(h), h);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(await countOrders(key), 1);
    });

    test('the replay is of the original response even after the order changed', async () => {
      const key = randomUUID();
      const first = await post(alice, key);
      const cancel = await rest(server.url, 'PATCH', `/orders/${first.json<{ id: string }>().id}`, {
        token: alice,
        body: { status: 'cancelled' },
        headers: { 'if-match': first.headers.get('etag')! },
      });
      assert.equal(cancel.status, 200);
      const again = await post(alice, key);
      assert.equal(again.text, first.text);
      assert.equal(again.json<{ status: string }>().status, 'pending');
    });

    test('the same key with a different body is 422', async () => {
      const key = randomUUID();
      assert.equal((await post(alice, key)).status, 201);
      const other = await post(alice, key, { items: [{ sku: 'DL-009', qty: 3 }] });
      assert.equal(other.status, 422);
      assert.equal(other.json<{ code: string }>().code, 'IDEMPOTENCY_KEY_REUSED');
      assert.equal(await countOrders(key), 1);
    });

    test('keys are scoped to the caller: bob may use the key alice used', async () => {
      const key = randomUUID();
      const a = await post(alice, key);
      const b = await post(bob, key);
      assert.equal(b.status, 201);
      assert.equal(b.headers.get('idempotent-replayed'), null);
      assert.notEqual(b.json<{ id: string }>().id, a.json<{ id: string }>().id);
    });

    test('a missing, empty, over-long or non-ASCII key is 400', async () => {
      for (const key of [undefined, '', 'k'.repeat(256), 'clé']) {
        const res = await post(alice, key);
        assert.equal(res.status, 400, String(key));
        assert.equal(res.json<{ code: string }>().code, 'IDEMPOTENCY_KEY_REQUIRED');
      }
      assert.equal((await post(alice, 'k'.repeat(255))).status, 201);
    });

    test('a request refused as invalid does not store the key: the corrected retry succeeds', async () => {
      const key = randomUUID();
      const bad = await post(alice, key, { items: [{ sku: 'NOPE', qty: 1 }] });
      assert.equal(bad.status, 422);
      const good = await post(alice, key);
      assert.equal(good.status, 201);
      assert.equal(good.headers.get('idempotent-replayed'), null);
    });

    test('a failure inside the transaction leaves neither the order nor the key', async () => {
      const key = randomUUID();
      const db = server.running.app.db;
      // A real fault on the database side: the items insert fails after the order row was written.
      await db.query(`create or replace function fail_items() returns trigger language plpgsql as $$
      begin if new.sku = 'PN-019' then raise exception 'simulated fault'; end if; return new; end $$`);
      await db.query(
        'create trigger fail_items before insert on order_items for each row execute function fail_items()',
      );
      try {
        const failed = await post(alice, key, { items: [{ sku: 'PN-019', qty: 1 }] });
        assert.equal(failed.status, 500);
        assert.equal(failed.json<{ code: string }>().code, 'INTERNAL_SERVER_ERROR');
        const [row] = await db.query<{ n: number }>('select count(*)::int as n from idempotency_keys where key = $1', [
          key,
        ]);
        assert.equal(row!.n, 0);
      } finally {
        await db.query('drop trigger fail_items on order_items');
      }
      const retry = await post(alice, key, { items: [{ sku: 'PN-019', qty: 1 }] });
      assert.equal(retry.status, 201, 'the 5xx did not poison the key');
      assert.equal(retry.headers.get('idempotent-replayed'), null);
      assert.equal(await countOrders(key), 1);
    });

    test('GraphQL createOrder shares the key store with REST', async () => {
      const key = randomUUID();
      const created = await post(alice, key);
      const id = created.json<{ id: string }>().id;
      const mutation = `mutation($key: String) { createOrder(input: { items: [{ sku: "DL-009", qty: 2 }] }, idempotencyKey: $key) { id } }`;
      const viaGraphql = await server.gql(mutation, { key }, { token: alice });
      assert.deepEqual(viaGraphql.body.data, { createOrder: { id } });
      const differs = await server.gql(
        `mutation($key: String) { createOrder(input: { items: [{ sku: "DL-009", qty: 5 }] }, idempotencyKey: $key) { id } }`,
        { key },
        { token: alice },
      );
      assert.equal(differs.body.errors?.[0]?.extensions?.code, 'IDEMPOTENCY_KEY_REUSED');

      const gqlKey = randomUUID();
      const first = await server.gql(mutation, { key: gqlKey }, { token: alice });
      const second = await server.gql(mutation, { key: gqlKey }, { token: alice });
      assert.deepEqual(second.body.data, first.body.data);
      const overRest = await post(alice, gqlKey);
      assert.equal(overRest.status, 201);
      assert.equal(overRest.headers.get('idempotent-replayed'), 'true');
      assert.equal(
        overRest.json<{ id: string }>().id,
        (first.body.data as { createOrder: { id: string } }).createOrder.id,
      );
      assert.equal(await countOrders(gqlKey), 1);
    });

    test('GraphQL refuses a malformed idempotency key', async () => {
      const res = await server.gql(
        `mutation { createOrder(input: { items: [{ sku: "DL-009", qty: 1 }] }, idempotencyKey: "") { id } }`,
        undefined,
        { token: alice },
      );
      assert.equal(res.body.errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
    });
  });
});

// ─── was __tests__/integration/rest-concurrency.test.ts ───
describe('rest-concurrency', () => {
  describe('REST under concurrency, two app instances on one database', () => {
    let a: TestServer;
    let b: TestServer;
    let alice: string;
    let carol: string;
    beforeAll(async () => {
      ({ a, b } = await startReplicas());
      ({ alice, carol } = await a.users());
    });
    afterAll(() => stopReplicas({ a, b }));

    test('50 concurrent POSTs with one key across both instances create exactly one order', async () => {
      const key = randomUUID();
      const body = { items: [{ sku: 'SD-015', qty: 1 }] };
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          rest((i % 2 ? b : a).url, 'POST', '/orders', { token: alice, body, headers: { 'idempotency-key': key } }),
        ),
      );
      const statuses = responses.map((r) => r.status);
      assert.ok(
        statuses.every((s) => s === 201 || s === 409),
        `statuses: ${statuses.join(',')}`,
      );
      const created = responses.filter((r) => r.status === 201);
      assert.ok(created.length >= 1);
      assert.equal(new Set(created.map((r) => r.text)).size, 1, 'every 201 carries the same body');
      assert.equal(created.filter((r) => r.headers.get('idempotent-replayed') === null).length, 1, 'one original');
      for (const r of responses.filter((r) => r.status === 409)) {
        assert.equal(r.json<{ code: string }>().code, 'IDEMPOTENCY_KEY_IN_USE');
        assert.equal(r.headers.get('retry-after'), '1');
      }
      const [row] = await a.running.app.db.query<{ n: number }>(
        `select count(*)::int as n from orders where id in (select order_id from idempotency_keys where key = $1)`,
        [key],
      );
      assert.equal(row!.n, 1);
    });

    test('50 concurrent PATCHes with the same If-Match: exactly one 200, the rest 412, version +1', async () => {
      const created = await rest(a.url, 'POST', '/orders', {
        token: alice,
        body: { items: [{ sku: 'KB-001', qty: 1 }] },
        headers: { 'idempotency-key': randomUUID() },
      });
      const { id } = created.json<{ id: string }>();
      const etag = created.headers.get('etag')!;
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          rest((i % 2 ? b : a).url, 'PATCH', `/orders/${id}`, {
            token: carol,
            body: { status: 'paid' },
            headers: { 'if-match': etag },
          }),
        ),
      );
      const statuses = responses.map((r) => r.status).sort();
      assert.equal(statuses.filter((s) => s === 200).length, 1, `statuses: ${statuses.join(',')}`);
      assert.equal(statuses.filter((s) => s === 412).length, 49);
      const [row] = await a.running.app.db.query<{ version: number; status: string }>(
        'select version, status from orders where id = $1',
        [id],
      );
      assert.deepEqual(row, { version: 2, status: 'paid' });
    });
  });
});

// ─── was __tests__/integration/rest-generated-client.test.ts ───
describe('rest-generated-client', () => {
  /**
   * A REST client as a user would generate it: openapi-typescript types from the served document, openapi-fetch
   * sending requests with its defaults (so a PATCH body goes out as `application/json`).
   */
  describe('a client generated from the OpenAPI document (openapi-typescript + openapi-fetch)', () => {
    let server: TestServer;
    let alice: string;
    beforeAll(async () => {
      server = await sharedServer();
      alice = await server.token('alice');
    });

    test('the committed client types are what openapi-typescript generates from the served document', async () => {
      const served = await server.http.get('/v1/openapi.json');
      assert.equal(served.status, 200);
      assert.equal(
        await restClientTypes(served.body),
        readFileSync(REST_CLIENT_TYPES, 'utf8'),
        `${REST_CLIENT_TYPES} is stale: run npm run codegen:rest-client`,
      );
    });

    test('create with Idempotency-Key, conditional GET, PATCH with If-Match, and a stale PATCH refused with 412', async () => {
      const sent: { method: string; contentType: string | null }[] = [];
      const checked: Middleware = {
        onRequest({ request }) {
          sent.push({ method: request.method, contentType: request.headers.get('content-type') });
        },
        // Every answer must be one the document describes, headers and body included.
        async onResponse({ request, response }) {
          assertDocumented(request.method, request.url, response, await response.clone().text());
        },
      };
      const client = createClient<paths>({
        baseUrl: `${server.url}/v1`,
        headers: { authorization: `Bearer ${alice}` },
      });
      client.use(checked);

      const key = randomUUID();
      const body = { items: [{ sku: 'KB-001', qty: 2 }] };
      const created = await client.POST('/orders', { params: { header: { 'Idempotency-Key': key } }, body });
      assert.equal(created.response.status, 201);
      const order = created.data!;
      assert.equal(order.status, 'pending');
      assert.equal(order.total_cents, 17800);
      const etag = created.response.headers.get('etag')!;
      assert.equal(etag, `"${order.id}.v1"`);
      assert.equal(created.response.headers.get('location'), `/v1/orders/${order.id}`);

      const replay = await client.POST('/orders', { params: { header: { 'Idempotency-Key': key } }, body });
      assert.equal(replay.response.status, 201);
      assert.equal(replay.response.headers.get('idempotent-replayed'), 'true');
      assert.equal(replay.data!.id, order.id);

      const path = { id: order.id };
      const unchanged = await client.GET('/orders/{id}', { params: { path, header: { 'If-None-Match': etag } } });
      assert.equal(unchanged.response.status, 304);
      assert.equal(unchanged.response.headers.get('etag'), etag);
      assert.equal(unchanged.data, undefined);

      const patched = await client.PATCH('/orders/{id}', {
        params: { path, header: { 'If-Match': etag } },
        body: { status: 'cancelled' },
      });
      assert.equal(patched.response.status, 200, JSON.stringify(patched.error));
      assert.equal(patched.data!.status, 'cancelled');
      const newEtag = patched.response.headers.get('etag');
      assert.equal(newEtag, `"${order.id}.v2"`);
      assert.deepEqual(sent.at(-1), { method: 'PATCH', contentType: 'application/json' });

      const stale = await client.PATCH('/orders/{id}', {
        params: { path, header: { 'If-Match': etag } },
        body: { status: 'cancelled' },
      });
      assert.equal(stale.response.status, 412);
      assert.equal(stale.response.headers.get('content-type'), 'application/problem+json; charset=utf-8');
      assert.equal(stale.data, undefined);
      assert.equal(stale.error!.status, 412);
      assert.equal(stale.error!.code, 'PRECONDITION_FAILED');
      assert.equal(stale.error!.type, '/problems/precondition-failed');

      // The old validator no longer matches: a conditional GET now returns the changed order.
      const changed = await client.GET('/orders/{id}', { params: { path, header: { 'If-None-Match': etag } } });
      assert.equal(changed.response.status, 200);
      assert.equal(changed.response.headers.get('etag'), newEtag);
      assert.equal(changed.data!.status, 'cancelled');
    });
  });
});

// ─── was __tests__/integration/rate-limit-rest.test.ts ───
describe('rate-limit-rest', () => {
  const POINTS = 25;
  const items = [{ sku: 'DL-009', qty: 1 }];

  /** `"orders";r=12;t=3599` → { r: 12, t: 3599 } */
  function rateLimit(header: string | undefined): { r: number; t: number } {
    const match = /^"orders";r=(\d+);t=(\d+)$/.exec(header ?? '');
    assert.ok(match, `RateLimit header: ${header}`);
    return { r: Number(match[1]), t: Number(match[2]) };
  }

  function createOrder(url: string, token: string) {
    return request(url)
      .post('/v1/orders')
      .set('authorization', `Bearer ${token}`)
      .set('idempotency-key', randomUUID())
      .send({ items });
  }

  describe('REST rate budget', () => {
    let server: TestServer;
    let tokens: { alice: string; bob: string; carol: string };

    beforeAll(async () => {
      // One proxy hop is trusted, so the tests can speak from different client addresses.
      server = await startTestServer({
        RATE_LIMIT_POINTS: String(POINTS),
        RATE_LIMIT_WINDOW_S: '3600',
        TRUST_PROXY: '1',
      });
      tokens = await server.users();
    });

    afterAll(async () => {
      await server.close();
    });

    test('every /v1 response carries RateLimit-Policy and RateLimit; reads cost 1 point, writes 10', async () => {
      // alice's budget, measured from what is left of it: other tests of this block spend a little of it too.
      const list = await request(server.url)
        .get('/v1/orders')
        .set('authorization', `Bearer ${tokens.alice}`)
        .expect(200)
        .expect('RateLimit-Policy', `"orders";q=${POINTS};w=3600`);
      const first = rateLimit(list.headers['ratelimit']);
      assert.ok(first.r >= 14 && first.r < POINTS, `r=${first.r}`);
      assert.ok(first.t >= 1 && first.t <= 3600);
      assert.equal(list.headers['retry-after'], undefined);
      const again = await request(server.url).get('/v1/orders').set('authorization', `Bearer ${tokens.alice}`);
      const left = rateLimit(again.headers['ratelimit']).r;
      assert.equal(left, first.r - 1);

      const created = await createOrder(server.url, tokens.alice).expect(201);
      assert.equal(rateLimit(created.headers['ratelimit']).r, left - 10);

      const read = await request(server.url)
        .get(created.headers['location']!)
        .set('authorization', `Bearer ${tokens.alice}`)
        .expect(200);
      assert.equal(rateLimit(read.headers['ratelimit']).r, left - 11);

      const missing = await request(server.url)
        .get('/v1/no-such-thing')
        .set('authorization', `Bearer ${tokens.alice}`)
        .expect(404)
        .expect('content-type', /application\/problem\+json/);
      assert.equal(rateLimit(missing.headers['ratelimit']).r, left - 12);

      const doc = await request(server.url)
        .get('/v1/openapi.json')
        .set('authorization', `Bearer ${tokens.alice}`)
        .expect(200);
      assert.equal(doc.headers['ratelimit'], undefined, 'the public, cacheable document is free');
      const after = await request(server.url).get('/v1/orders').set('authorization', `Bearer ${tokens.alice}`);
      assert.equal(rateLimit(after.headers['ratelimit']).r, left - 13);
    });

    test('a spent budget is 429 problem+json with Retry-After, and a refused POST creates nothing', async () => {
      await createOrder(server.url, tokens.bob).expect(201);
      const last = await createOrder(server.url, tokens.bob).expect(201);
      const refused = await createOrder(server.url, tokens.bob)
        .expect(429)
        .expect('content-type', /^application\/problem\+json/)
        .expect('RateLimit-Policy', `"orders";q=${POINTS};w=3600`);
      const { r, t } = rateLimit(refused.headers['ratelimit']);
      assert.equal(r, POINTS - 20, 'the refused request spent nothing');
      assert.equal(refused.headers['retry-after'], String(t));
      assert.equal(refused.headers['cache-control'], 'no-store');
      assert.equal(refused.body.type, '/problems/rate-limited');
      assert.equal(refused.body.status, 429);
      assert.equal(refused.body.code, 'RATE_LIMITED');
      assert.equal(refused.body.instance, '/v1/orders');
      assert.match(refused.body.detail, /retry in \d+ seconds/);

      // Reads are cheaper, so they still fit in what is left.
      const mine = await request(server.url).get('/v1/orders').set('authorization', `Bearer ${tokens.bob}`).expect(200);
      assert.equal(mine.body.orders[0].id, last.body.id, 'the refused POST created no order');

      await request(server.url).get('/problems/rate-limited').expect(200).expect('content-type', /html/);
    });

    test('different users have separate budgets', async () => {
      for (let i = 0; i < POINTS; i++) {
        await request(server.url).get('/v1/orders').set('authorization', `Bearer ${tokens.carol}`).expect(200);
      }
      await request(server.url).get('/v1/orders').set('authorization', `Bearer ${tokens.carol}`).expect(429);
      const alice = await request(server.url)
        .get('/v1/orders')
        .set('authorization', `Bearer ${tokens.alice}`)
        .expect(200);
      assert.ok(rateLimit(alice.headers['ratelimit']).r > 0);
    });

    test('anonymous callers are keyed by their address', async () => {
      const anonymous = (ip: string) => request(server.url).get('/v1/orders').set('x-forwarded-for', ip);
      for (let i = 0; i < POINTS; i++) {
        const res = await anonymous('203.0.113.7').expect(401);
        assert.equal(rateLimit(res.headers['ratelimit']).r, POINTS - 1 - i);
      }
      const refused = await anonymous('203.0.113.7')
        .expect(429)
        .expect('content-type', /problem\+json/);
      assert.ok(Number(refused.headers['retry-after']) >= 1);
      const elsewhere = await anonymous('203.0.113.8').expect(401);
      assert.equal(rateLimit(elsewhere.headers['ratelimit']).r, POINTS - 1);
      // A signed-in caller at the spent address spends their own budget.
      await request(server.url)
        .get('/v1/orders')
        .set('x-forwarded-for', '203.0.113.7')
        .set('authorization', `Bearer ${tokens.alice}`)
        .expect(200);
    });
  });

  describe('REST rate budget shared through Redis', () => {
    let redis: RedisServer;
    let a: TestServer;
    let b: TestServer;

    beforeAll(async () => {
      redis = await startRedis();
      const env = { REDIS_URL: redis.url, RATE_LIMIT_POINTS: String(POINTS) };
      a = await startTestServer(env, { replicated: true });
      b = await startTestServer({ ...env, OIDC_ISSUER: a.running.app.issuer }, { sameDatabaseAs: a });
    });

    afterAll(async () => {
      await b?.close();
      await a?.close();
      await redis?.stop();
    });

    test('points spent on one replica are gone on the other', async () => {
      const alice = await a.token('alice');
      await createOrder(a.url, alice).expect(201);
      const last = await createOrder(a.url, alice).expect(201);
      const onB = await request(b.url).get('/v1/orders').set('authorization', `Bearer ${alice}`).expect(200);
      assert.equal(rateLimit(onB.headers['ratelimit']).r, POINTS - 21);
      await createOrder(b.url, alice).expect(429);
      const onA = await request(a.url).get('/v1/orders').set('authorization', `Bearer ${alice}`).expect(200);
      assert.equal(rateLimit(onA.headers['ratelimit']).r, POINTS - 22);
      assert.equal(onA.body.orders[0].id, last.body.id, 'the refused POST created no order');
    });
  });
});

// ─── was __tests__/integration/customers-created-on-first-request.test.ts ───
describe('customers-created-on-first-request', () => {
  describe("customers are created on their subject's first request", () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await sharedServer();
    });

    /** A token for a subject the API has never seen, signed by the embedded issuer. */
    const tokenFor = (sub: string) =>
      idpSignedToken(server, { sub, expiresIn: 300, scope: 'orders:read', claims: { name: 'New Person' } });

    test("new subjects' concurrent first requests each get one and the same customer", async () => {
      const subjects = Array.from({ length: 15 }, () => `newcomer-${randomUUID()}`);
      const tokens = await Promise.all(subjects.map(tokenFor));
      const responses = await Promise.all(
        tokens.flatMap((token) =>
          Array.from({ length: 10 }, () => server.gql('{ viewer { customer { id name } } }', undefined, { token })),
        ),
      );
      for (const res of responses) assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
      for (let s = 0; s < subjects.length; s++) {
        const ids = new Set(
          responses
            .slice(s * 10, s * 10 + 10)
            .map((r) => (r.body.data as { viewer: { customer: { id: string } } }).viewer.customer.id),
        );
        assert.equal(ids.size, 1);
      }
      const [row] = await server.running.app.db.query<{ n: number }>(
        'select count(*)::int as n from customers where subject = any($1::text[])',
        [subjects],
      );
      assert.equal(row!.n, subjects.length);
    });
  });
});

// ─── was __tests__/integration/http-unparsable-requests.test.ts ───
describe('http-unparsable-requests', () => {
  describe('a request Node cannot parse is answered as problem details, not a bare status line', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await sharedServer();
    });

    /** Writes bytes on a fresh socket and reads everything until the server closes it. */
    async function rawExchange(bytes: string): Promise<{ statusLine: string; headers: string; body: string }> {
      const { port } = new URL(server.url);
      const socket = connect(Number(port), '127.0.0.1');
      await once(socket, 'connect');
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.write(bytes);
      await once(socket, 'close');
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', body = ''] = text.split('\r\n\r\n');
      const [statusLine = '', ...headers] = head.split('\r\n');
      return { statusLine, headers: headers.join('\n').toLowerCase(), body };
    }

    test('request headers over 16 KB are 431 problem details, not a bare status line', async () => {
      const res = await rawExchange(`GET /v1/orders HTTP/1.1\r\nHost: x\r\nCookie: c=${'a'.repeat(20_000)}\r\n\r\n`);
      assert.equal(res.statusLine, 'HTTP/1.1 431 Request headers too large');
      assert.match(res.headers, /^content-type: application\/problem\+json$/m);
      assert.match(res.headers, /^connection: close$/m);
      assert.deepEqual(JSON.parse(res.body), {
        type: '/problems/headers-too-large',
        title: 'Request headers too large',
        status: 431,
        detail: 'The request line and headers exceed 16 KB.',
        instance: '/v1/orders',
        code: 'HEADERS_TOO_LARGE',
      });
    });

    test('on /graphql and /graphql/stream a 431 is a GraphQL error with extensions.code, whatever overflowed', async () => {
      const long = 'a'.repeat(17_000);
      for (const head of [
        `POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nCookie: c=${long}\r\n\r\n`,
        `GET /graphql?query=${long} HTTP/1.1\r\nHost: x\r\n\r\n`,
        `GET /graphql/stream?query=${long} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n`,
        `GET /GraphQL/?query=${long} HTTP/1.1\r\nHost: x\r\n\r\n`,
      ]) {
        const res = await rawExchange(head);
        assert.equal(res.statusLine, 'HTTP/1.1 431 Request headers too large', head.slice(0, 30));
        assert.match(res.headers, /^content-type: application\/json; charset=utf-8$/m);
        assert.match(res.headers, /^connection: close$/m);
        assert.deepEqual(JSON.parse(res.body), {
          errors: [
            {
              message: 'The request line and headers exceed 16 KB.',
              extensions: { code: 'HEADERS_TOO_LARGE' },
            },
          ],
        });
      }
    });

    test('a 431 for a request line over 16 KB names its path as the instance, without the query', async () => {
      const long = 'a'.repeat(17_000);
      for (const [target, instance] of [
        [`/v1/orders?cursor=${long}`, '/v1/orders'],
        [`/v1/orders/<x>#${long}`, '/v1/orders/%3Cx%3E'],
        [`/v1/${long}`, `/v1/${long}`],
      ]) {
        const res = await rawExchange(`GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
        assert.equal(res.statusLine, 'HTTP/1.1 431 Request headers too large');
        assert.match(res.headers, /^content-type: application\/problem\+json$/m);
        const body = JSON.parse(res.body) as Problem;
        assert.equal(body.code, 'HEADERS_TOO_LARGE');
        assert.equal(body.instance, instance);
      }
      // 16 concurrent ones each name their own path.
      const answers = await Promise.all(
        Array.from({ length: 16 }, (_, i) => rawExchange(`GET /v1/orders/n${i}?q=${long} HTTP/1.1\r\nHost: x\r\n\r\n`)),
      );
      assert.deepEqual(
        answers.map((a) => (JSON.parse(a.body) as Problem).instance),
        Array.from({ length: 16 }, (_, i) => `/v1/orders/n${i}`),
      );
    });

    test('an HTTP/1.1 request without Host is 400 (RFC 9112 §3.2), also as a WebSocket upgrade: problem details, a GraphQL error on /graphql', async () => {
      const rest = await rawExchange('GET /v1/orders HTTP/1.1\r\n\r\n');
      assert.equal(rest.statusLine, 'HTTP/1.1 400 Malformed request');
      assert.match(rest.headers, /^content-type: application\/problem\+json$/m);
      assert.match(rest.headers, /^connection: close$/m);
      const body = JSON.parse(rest.body) as Problem;
      assert.deepEqual(
        [body.code, body.detail, body.instance],
        ['MALFORMED_REQUEST', 'An HTTP/1.1 request must carry a Host header.', '/v1/orders'],
      );
      for (const head of [
        'POST /graphql HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
        'GET /graphql HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n',
      ]) {
        const res = await rawExchange(head);
        assert.equal(res.statusLine, 'HTTP/1.1 400 Malformed request', head);
        assert.match(res.headers, /^content-type: application\/json; charset=utf-8$/m);
        assert.match(res.headers, /^connection: close$/m);
        assert.deepEqual(JSON.parse(res.body), {
          errors: [{ message: 'An HTTP/1.1 request must carry a Host header.', extensions: { code: 'BAD_REQUEST' } }],
        });
      }
    });

    test('an HTTP/1.0 request without Host is served', async () => {
      const res = await rawExchange('GET /healthz HTTP/1.0\r\n\r\n');
      assert.equal(res.statusLine, 'HTTP/1.1 200 OK');
      assert.deepEqual(JSON.parse(res.body), { status: 'ok' });
    });

    test('a request that is not HTTP/1.1 at all is 400 malformed-request problem details', async () => {
      const res = await rawExchange('HELLO THERE\r\n\r\n');
      assert.equal(res.statusLine, 'HTTP/1.1 400 Malformed request');
      assert.match(res.headers, /^content-type: application\/problem\+json$/m);
      const body = JSON.parse(res.body) as Problem;
      assert.equal(body.type, '/problems/malformed-request');
      assert.equal(body.code, 'MALFORMED_REQUEST');
    });

    test("a problem's instance is the request's path as a valid URI reference: no query, hostile bytes encoded", async () => {
      const addFormats = (addFormatsModule as unknown as { default: (ajv: Ajv2020) => void }).default;
      const ajv = new Ajv2020();
      addFormats(ajv);
      const isUriReference = ajv.compile({ type: 'string', format: 'uri-reference' });
      const token = await server.token('alice');
      const cases: [string, string, number, string][] = [
        // [request line and headers, what the body names, status, instance]
        ['GET /v1/orders/%ZZ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ' + token, 'REST', 400, '/v1/orders/%25ZZ'],
        ['GET /v1/orders?cursor={x} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ' + token, 'REST', 400, '/v1/orders'],
        [
          'GET /nope/"<b>{x}|^`\\?access_token=secret HTTP/1.1\r\nHost: x',
          'a route',
          404,
          '/nope/%22%3Cb%3E%7Bx%7D%7C%5E%60%5C',
        ],
        ['GET /caf%E9%%41 HTTP/1.1\r\nHost: x', 'a route', 404, '/caf%E9%25%41'],
        // Node's parser refuses a byte outside ASCII (a target it cannot read back is `/`), but lets a fragment by.
        ['GET /caf\u00e9/x HTTP/1.1\r\nHost: x', 'Node', 400, '/'],
        ['GET /v1/orders/<x>#frag HTTP/1.1\r\nHost: x', 'REST', 401, '/v1/orders/%3Cx%3E'],
        [
          `GET /v1/orders/<x>?token=secret HTTP/1.1\r\nHost: x\r\nCookie: c=${'a'.repeat(20_000)}`,
          'Node',
          431,
          '/v1/orders/%3Cx%3E',
        ],
        ['GET /v1/orders?x={y} HTTP/1.1', 'no Host', 400, '/v1/orders'],
      ];
      for (const [head, where, status, instance] of cases) {
        const { port } = new URL(server.url);
        const socket = connect(Number(port), '127.0.0.1');
        await once(socket, 'connect');
        const chunks: Buffer[] = [];
        socket.on('data', (chunk: Buffer) => chunks.push(chunk));
        // latin1: each character one byte, as a client that sends raw bytes would.
        socket.write(`${head}\r\nConnection: close\r\n\r\n`, 'latin1');
        await once(socket, 'close');
        const [responseHead = '', body = ''] = Buffer.concat(chunks).toString('utf8').split('\r\n\r\n');
        const statusLine = responseHead.split('\r\n')[0]!;
        assert.match(statusLine, new RegExp(`^HTTP/1.1 ${status} `), `${where}: ${statusLine}`);
        const problem = JSON.parse(body) as Problem;
        assert.equal(problem.instance, instance, where);
        assert.ok(isUriReference(problem.instance), `${where}: ${problem.instance} is a URI reference`);
      }
    });
  });
});

// ─── was __tests__/integration/security-headers.test.ts ───
describe('security-headers', () => {
  /** No page of this site may be framed by another (clickjacking): both the CSP directive and the older header. */
  function assertNotFramable(res: { headers: Record<string, string | undefined> }, label: string) {
    assert.match(res.headers['content-security-policy'] ?? '', /(^|;\s*)frame-ancestors 'none'(;|$)/, label);
    assert.equal(res.headers['x-frame-options'], 'DENY', label);
  }

  const headersOf = (res: Response) => Object.fromEntries(res.headers);

  describe('security headers on every response, framing refused for every page', () => {
    let server: TestServer;
    let base: string;
    beforeAll(async () => {
      server = await sharedServer();
      base = server.running.publicUrl;
    });

    for (const [method, path, accept] of [
      ['GET', '/', 'application/json'],
      ['GET', '/healthz', 'application/json'],
      ['GET', '/readyz', 'application/json'],
      ['GET', '/metrics', 'text/plain'],
      ['GET', '/nowhere', 'application/json'],
      ['GET', '/v1/orders', 'application/json'],
      ['GET', '/v1/openapi.json', 'application/json'],
      ['POST', '/graphql', 'application/json'],
      ['GET', '/graphql?query=%7Bproducts%7Bsku%7D%7D', 'application/json'],
      ['GET', '/graphql', 'text/html'],
      ['GET', '/graphql/stream', 'text/event-stream'],
      ['GET', '/problems/not-found', 'text/html'],
      ['GET', '/problems/no-such-problem', 'application/json'],
      ['GET', '/auth/login', 'text/html'],
      ['GET', '/auth/login?returnTo=https://evil.example/', 'text/html'],
      ['GET', '/auth/callback', 'text/html'],
      ['GET', '/auth/session', 'application/json'],
      ['GET', '/idp/.well-known/openid-configuration', 'application/json'],
      ['GET', '/idp/jwks', 'application/json'],
      ['GET', '/idp/auth?client_id=nobody', 'text/html'],
      ['GET', '/idp/session/end', 'text/html'],
    ] as const) {
      test(`${method} ${path} sends X-Content-Type-Options: nosniff, and a page cannot be framed`, async () => {
        const req = method === 'GET' ? request(server.url).get(path) : request(server.url).post(path).send({});
        const res = await req.set('accept', accept);
        assert.ok(res.status < 500, `${res.status} ${res.text}`);
        assert.equal(res.headers['x-content-type-options'], 'nosniff');
        if (/^text\/html/.test(res.headers['content-type'] ?? '')) assertNotFramable(res, `${method} ${path}`);
      });
    }

    test('the IdP sign-in form is served with framing refused, and signing in through it still works', async () => {
      const browser = new WebClient();
      let res = await browser.get(await startLogin(browser, base));
      while (res.status === 302 || res.status === 303) res = await browser.get(location(res));
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
      assert.match(await res.text(), /<form method="post"/);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      assertNotFramable({ headers: headersOf(res) }, 'sign-in form');

      const { response } = await signIn(new WebClient(), base, 'alice');
      assert.equal(response.status, 303);
      assert.equal(response.headers.get('location'), '/');
    });

    test("the home page and the IdP's sign-in page allow no script, only their own inline style by its hash", async () => {
      const policy = (csp: string | undefined) => (csp ?? '').split(/;\s*/).sort();
      const home = await request(server.url).get('/').set('accept', 'text/html').expect(200);
      const style = /<style>([\s\S]*?)<\/style>/.exec(home.text)![1]!;
      const hash = createHash('sha256').update(style).digest('base64');
      const expected = [
        "base-uri 'none'",
        "connect-src 'self'",
        "default-src 'none'",
        "frame-ancestors 'none'",
        `style-src 'sha256-${hash}'`,
      ];
      assert.deepEqual(policy(home.headers['content-security-policy']), expected);
      assert.doesNotMatch(home.text, /<script|style="/);
      const browser = new WebClient();
      let res = await browser.get(await startLogin(browser, server.running.publicUrl));
      while (res.status === 302 || res.status === 303) res = await browser.get(location(res));
      assert.equal(res.status, 200);
      assert.deepEqual(policy(res.headers.get('content-security-policy') ?? undefined), expected);
    });

    test('pages keep the Origin of their own form posts: Referrer-Policy is same-origin, not no-referrer', async () => {
      const res = await request(server.url).get('/problems/not-found').expect(200);
      // Under no-referrer a browser sends `Origin: null` with a same-site form post, and sign-out would refuse it.
      assert.equal(res.headers['referrer-policy'], 'same-origin');
    });

    test("the Sandbox landing page keeps Apollo's CDN scripts: the policy restricts framing only", async () => {
      const res = await request(server.url).get('/graphql').set('accept', 'text/html').expect(200);
      assert.match(res.text, /embeddable-sandbox\.cdn\.apollographql\.com/);
      assert.equal(res.headers['content-security-policy'], "frame-ancestors 'none'");
    });
  });
});
