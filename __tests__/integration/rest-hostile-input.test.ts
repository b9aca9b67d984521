import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { brotliCompressSync, deflateSync, gzipSync, zstdCompressSync } from 'node:zlib';
import request from 'supertest';
import type { Problem } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

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
    server = await startTestServer();
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
  afterAll(() => server.close());

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
    ['invalid UTF-8', Buffer.from([0x5b, 0x22, 0xff, 0xfe, 0x22, 0x2c, 0x22, 0x61, 0x22, 0x5d]).toString('base64url')],
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
      const res = await request(server.url).get('/v1/orders').query({ limit }).set('authorization', `Bearer ${alice}`);
      assertProblem(res, 400, 'malformed-request');
    });
  }
});
