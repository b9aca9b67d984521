import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { Validator } from '@seriousme/openapi-schema-validator';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { openapiDocument } from '../../src/http/rest/openapi.js';
import type { Problem } from '../helpers/http.js';
import {
  releasedContract,
  rest,
  responseValidator,
  type ResponseValidator,
  type RestOptions,
} from '../helpers/openapi.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface OrderBody {
  id: string;
  status: string;
  total_cents: number;
}

/** Points each user may spend here: alice's and carol's scenario stay well under it, bob spends it all. */
const BUDGET = 600;
const WRITE_PRICE = 10;

/**
 * The REST scenario — create, read, HEAD, list pages, conditional GET, conditional writes, PUT, DELETE, idempotent
 * replay and every refusal — with each answer checked against the document the service serves (and, for an operation
 * that existed at release, against openapi.released.json too: helpers/openapi.ts): its status must be
 * declared for the operation, each header declared (required ones present, values valid) and none undeclared, and
 * its body valid for its media type. Responses the document declares but this scenario never receives fail the last
 * test, unless they are listed there with the reason they cannot be driven from outside.
 */
describe('every REST answer is one the served OpenAPI document describes', () => {
  let server: TestServer;
  let contract: ResponseValidator;
  let alice: string;
  let bob: string;
  let carol: string;
  /** alice with orders:read only, and with no orders scope at all. */
  let aliceReads: string;
  let aliceNoScope: string;
  const call = (method: string, path: string, opts: RestOptions = {}) => rest(server.url, method, path, opts, contract);
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

  beforeAll(async () => {
    server = await startTestServer({ RATE_LIMIT_POINTS: String(BUDGET) });
    ({ alice, bob, carol } = await server.users());
    const issuer = server.running.app.issuer;
    const login = (scope: string) =>
      loginWithPkce({ issuer, username: 'alice', password: 'alice', scope }).then((t) => t.accessToken);
    [aliceReads, aliceNoScope] = await Promise.all([login('openid orders:read'), login('openid')]);
  });
  afterAll(() => server.close());

  test('the served document is valid OpenAPI 3.1, is the one the code generates, and builds the validator', async () => {
    const served = await server.http.get('/v1/openapi.json');
    assert.equal(served.status, 200);
    assert.equal(served.headers['content-type'], 'application/json; charset=utf-8');
    const result = await new Validator().validate(served.body as Record<string, unknown>);
    assert.equal(result.valid, true, JSON.stringify(result.errors));
    assert.deepEqual(served.body, JSON.parse(JSON.stringify(openapiDocument)));
    contract = responseValidator(served.body as Record<string, unknown>);
  });

  let order: OrderBody;
  let etag: string;
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

  test('POST creates (201, Location, ETag); the same key and body replay it; another body under it is 422', async () => {
    const key = randomUUID();
    const created = await call('POST', '/orders', { token: alice, body: { items: ITEMS }, headers: keyed(key) });
    assert.equal(created.status, 201, created.text);
    order = created.json<OrderBody>();
    etag = created.headers.get('etag')!;
    assert.equal(created.headers.get('location'), `/v1/orders/${order.id}`);
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
  });

  test('POST refusals: no key 400, bad JSON 400, a field invalid 422, text/plain 415, too large 413, Accept 406, 403', async () => {
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
    await problem(call('POST', '/orders', { token: alice, raw: large, headers: keyed() }), 413, 'PAYLOAD_TOO_LARGE');
    await problem(
      call('POST', '/orders', { token: alice, body, headers: { ...keyed(), accept: 'application/xml' } }),
      406,
      'NOT_ACCEPTABLE',
    );
    await problem(call('POST', '/orders', { token: aliceReads, body, headers: keyed() }), 403, 'INSUFFICIENT_SCOPE');
    const forOther = { ...body, customer_id: 'cus_00000000000000000000000000' };
    await problem(call('POST', '/orders', { token: alice, body: forOther, headers: keyed() }), 403, 'FORBIDDEN');
  });

  test('GET and HEAD one order: 200 with ETag, 304 on If-None-Match (strong or weak), HEAD without a body', async () => {
    const got = await call('GET', `/orders/${order.id}`, { token: alice });
    assert.equal(got.status, 200);
    assert.equal(got.headers.get('etag'), etag);
    assert.equal(got.headers.get('cache-control'), 'private, no-cache');
    assert.equal(got.headers.get('vary'), 'Authorization');
    for (const method of ['GET', 'HEAD']) {
      for (const tag of [etag, `W/${etag}`]) {
        const cached = await call(method, `/orders/${order.id}`, { token: alice, headers: { 'if-none-match': tag } });
        assert.equal(cached.status, 304, `${method} If-None-Match: ${tag}`);
        assert.equal(cached.headers.get('etag'), etag);
      }
    }
    const head = await call('HEAD', `/orders/${order.id}`, { token: alice });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('etag'), etag);
    assert.equal(head.headers.get('content-type'), 'application/json; charset=utf-8');
  });

  test('the check bites: a declared header with a wrong value fails against the served and the released document; an undeclared one fails against the served', async () => {
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
  });

  test('GET and HEAD refusals: a malformed id 400, unknown or not yours 404, Accept 406, no order scope 403', async () => {
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
  });

  test('credentials: none is 401 after the budget is charged; a bad token is 401 before it, on every operation', async () => {
    for (const [method, path, opts] of everyOperation()) {
      const anonymous = await problem(call(method, path, opts), 401, 'UNAUTHENTICATED');
      assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer realm="orders-api"');
      assert.match(anonymous.headers.get('ratelimit')!, /^"orders";r=\d+;t=\d+$/);
      const refused = await problem(call(method, path, { ...opts, token: 'not.a.token' }), 401, 'UNAUTHENTICATED');
      assert.match(refused.headers.get('www-authenticate')!, /^Bearer realm="orders-api", error="invalid_token"/);
      assert.equal(refused.headers.get('ratelimit'), null, `${method}: refused before the budget is charged`);
    }
  });

  test('list pages: Link rel=next and next_cursor, the last page without them; a bad limit or cursor is 400', async () => {
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
  });

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
    test(`${method} refusals: 428 without If-Match, 412 stale or weak, 412 If-None-Match: * or current, 400 malformed, 415, 422, 413, 406, 403, 404`, async () => {
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
    });
  }

  test('PATCH follows the lifecycle (409) and the roles (403); PUT and PATCH with If-Match are 200; PUT then 409', async () => {
    const path = `/orders/${order.id}`;
    const patch = (token: string, status: string) =>
      call('PATCH', path, { token, body: { status }, headers: { 'if-match': etag } });
    await problem(patch(carol, 'delivered'), 409, 'INVALID_TRANSITION');
    await problem(patch(alice, 'paid'), 403, 'FORBIDDEN');

    const body = { items: [{ sku: 'KB-001', qty: 3 }] };
    // An If-None-Match that names another version holds.
    const replaced = await call('PUT', path, {
      token: alice,
      body,
      headers: { 'if-match': etag, 'if-none-match': `"${order.id}.v999"` },
    });
    assert.equal(replaced.status, 200, replaced.text);
    assert.equal(replaced.json<OrderBody>().total_cents, 3 * 8900);
    etag = replaced.headers.get('etag')!;
    const cancelled = await patch(alice, 'cancelled');
    assert.equal(cancelled.status, 200, cancelled.text);
    assert.equal(cancelled.json<OrderBody>().status, 'cancelled');
    etag = cancelled.headers.get('etag')!;
    await problem(call('PUT', path, { token: alice, body, headers: { 'if-match': etag } }), 409, 'NOT_EDITABLE');
  });

  test('DELETE: staff only (403), 412 on a stale If-Match or If-None-Match: *, 400 on a malformed one, 204, then 404', async () => {
    const path = `/orders/${order.id}`;
    await problem(call('DELETE', path, { token: alice }), 403, 'FORBIDDEN');
    await problem(
      call('DELETE', path, { token: carol, headers: { 'if-match': `"${order.id}.v1"` } }),
      412,
      'PRECONDITION_FAILED',
    );
    await problem(call('DELETE', path, { token: carol, headers: { 'if-match': 'nope' } }), 400, 'MALFORMED_REQUEST');
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
  });

  test('a wrong method is 405 naming the documented ones, and OPTIONS names them with 204', async () => {
    const wrong = await call('POST', `/orders/${order.id}`, { token: alice, body: {} });
    assert.equal(wrong.status, 405);
    const options = await call('OPTIONS', '/orders', { token: alice });
    assert.equal(options.status, 204);
  });

  test('a spent budget is 429 with Retry-After and the RateLimit fields on every operation, HEAD included', async () => {
    // bob spends what is left of his budget at once: as many concurrent writes as it pays for, and five more.
    const before = await call('GET', '/orders', { token: bob });
    const left = Number(/;r=(\d+);/.exec(before.headers.get('ratelimit')!)![1]);
    const affordable = Math.floor(left / WRITE_PRICE);
    const spend = await Promise.all(
      Array.from({ length: affordable + 5 }, () =>
        call('DELETE', '/orders/ord_00000000000000000000000000', { token: bob }),
      ),
    );
    const statuses = spend.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 429).length, 5, String(statuses));
    assert.equal(statuses.filter((s) => s === 404).length, affordable, String(statuses));
    // What is left buys reads (1 point each): exactly that many, and then none.
    const reads = await Promise.all(
      Array.from({ length: (left % WRITE_PRICE) + 1 }, () => call('GET', '/orders?limit=1', { token: bob })),
    );
    assert.deepEqual(reads.map((r) => r.status).sort(), [...Array(left % WRITE_PRICE).fill(200), 429]);
    for (const [method, path, opts] of everyOperation()) {
      const limited = await problem(call(method, path, { ...opts, token: bob }), 429, 'RATE_LIMITED');
      assert.match(limited.headers.get('retry-after')!, /^\d+$/);
      assert.match(limited.headers.get('ratelimit')!, /^"orders";r=0;t=\d+$/);
    }
  });

  test('every response the document declares for /orders was received, but for those no client can cause', () => {
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
    const driven = contract.documented().filter((r) => / \/orders(\/\{id\})? /.test(r));
    const missing = driven.filter(
      (r) => !contract.seen().has(r) && !UNDRIVABLE.has(r) && !UNDRIVABLE.has(r.split(' ').at(-1)!),
    );
    assert.deepEqual(missing, []);
  });
});
