import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import * as addFormatsModule from 'ajv-formats';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { Problem } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('a request Node cannot parse is answered as problem details, not a bare status line', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

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
