import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { zstdCompressSync } from 'node:zlib';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Sends bytes as they are: superagent would otherwise JSON-serialise a Buffer sent with a JSON content type. */
const sendRaw = (req: request.Test, body: Buffer) => req.serialize(() => body as unknown as string).send(body);

describe('a body GraphQL cannot read is a GraphQL 400, not a 500', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  for (const path of ['/graphql', '/graphql/stream']) {
    for (const encoding of ['gzip', 'deflate', 'br']) {
      test(`POST ${path} with a corrupt ${encoding} body is 400 BAD_REQUEST`, async () => {
        const req = request(server.url)
          .post(path)
          .set('content-type', 'application/json')
          .set('accept', path.endsWith('stream') ? 'text/event-stream' : 'application/json')
          .set('content-encoding', encoding);
        const res = await sendRaw(req, Buffer.from('this is not compressed'));
        assert.equal(res.status, 400, res.text);
        assert.match(res.headers['content-type'] ?? '', /^application\/json/);
        const body = JSON.parse(res.text) as { errors: { extensions: { code: string } }[] };
        assert.equal(body.errors[0]!.extensions.code, 'BAD_REQUEST');
      });
    }
  }

  for (const path of ['/graphql', '/graphql/stream']) {
    test(`POST ${path} with an empty JSON body is 400 BAD_REQUEST naming the body`, async () => {
      const req = request(server.url)
        .post(path)
        .set('content-type', 'application/json')
        .set('accept', path.endsWith('stream') ? 'text/event-stream' : 'application/json');
      const res = await sendRaw(req, Buffer.alloc(0));
      assert.equal(res.status, 400, res.text);
      const body = JSON.parse(res.text) as { errors: { message: string; extensions: { code: string } }[] };
      assert.deepEqual(
        body.errors.map((e) => [e.message, e.extensions.code]),
        [[path === '/graphql' ? 'The request body is not valid JSON.' : 'The body is not valid JSON.', 'BAD_REQUEST']],
      );
    });

    for (const charset of ['utf-16', 'latin1']) {
      test(`POST ${path} declared as charset=${charset} is 415 UNSUPPORTED_MEDIA_TYPE`, async () => {
        const req = request(server.url)
          .post(path)
          .set('content-type', `application/json; charset=${charset}`)
          .set('accept', path.endsWith('stream') ? 'text/event-stream' : 'application/json');
        const res = await sendRaw(req, Buffer.from('{"query":"{ products { sku } }"}'));
        assert.equal(res.status, 415, res.text);
        const body = JSON.parse(res.text) as { errors: { message: string; extensions: { code: string } }[] };
        assert.deepEqual(
          body.errors.map((e) => [e.message, e.extensions.code]),
          [
            [
              path === '/graphql'
                ? 'Request bodies must be UTF-8 encoded.'
                : 'Send the body as UTF-8 JSON, without content encoding or as gzip, deflate or br.',
              'UNSUPPORTED_MEDIA_TYPE',
            ],
          ],
        );
      });
    }
  }

  test('POST /graphql/stream with a body that is not JSON is 400 BAD_REQUEST', async () => {
    const res = await request(server.url)
      .post('/graphql/stream')
      .set('content-type', 'application/json')
      .set('accept', 'text/event-stream')
      .send('{"query": "{ products { sku } }"');
    assert.equal(res.status, 400, res.text);
    const body = JSON.parse(res.text) as { errors: { message: string; extensions: { code: string } }[] };
    assert.equal(body.errors[0]!.extensions.code, 'BAD_REQUEST');
    assert.match(body.errors[0]!.message, /not valid JSON/);
  });

  for (const path of ['/graphql', '/graphql/stream']) {
    test(`POST ${path} in a content coding not read here (zstd) is 415 UNSUPPORTED_MEDIA_TYPE naming the codings read`, async () => {
      const answers = await Promise.all(
        ['zstd', 'compress', 'zstd', 'compress', 'zstd', 'compress', 'zstd', 'compress'].map((coding) =>
          sendRaw(
            request(server.url)
              .post(path)
              .set('content-type', 'application/json')
              .set('accept', path.endsWith('stream') ? 'text/event-stream' : 'application/json')
              .set('content-encoding', coding),
            zstdCompressSync(Buffer.from('{"query":"{ products { sku } }"}')),
          ),
        ),
      );
      for (const res of answers) {
        assert.equal(res.status, 415, res.text);
        assert.equal(res.headers['accept-encoding'], 'gzip, deflate, br');
        assert.deepEqual(JSON.parse(res.text), {
          errors: [
            {
              message:
                "The body's Content-Encoding is not one this server reads: send it without one, or as gzip, deflate, br.",
              extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' },
            },
          ],
        });
      }
    });
  }

  describe("graphql-sse's own refusals on /graphql/stream carry extensions.code", () => {
    let alice: string;
    beforeAll(async () => {
      alice = await server.token('alice');
    });

    const stream = () => request(server.url);
    type Errors = { errors: { message: string; extensions: { code: string } }[] };
    const errorsOf = (res: request.Response) =>
      (JSON.parse(res.text) as Errors).errors.map((e) => [e.message, e.extensions.code]);

    test('a stream request without a query is 400 BAD_REQUEST "Missing query"', async () => {
      const res = await stream()
        .post('/graphql/stream')
        .set('authorization', `Bearer ${alice}`)
        .set('accept', 'text/event-stream')
        .set('content-type', 'application/json')
        .send('{"variables":{}}');
      assert.equal(res.status, 400, res.text);
      assert.match(res.headers['content-type'] ?? '', /^application\/json; charset=utf-8/);
      assert.deepEqual(errorsOf(res), [['Missing query', 'BAD_REQUEST']]);
    });

    test('an operation or a DELETE for a stream token nobody reserved is 404 NOT_FOUND "Stream not found"', async () => {
      const token = { 'x-graphql-event-stream-token': `t-${Date.now()}`, authorization: `Bearer ${alice}` };
      const add = await stream()
        .post('/graphql/stream')
        .set(token)
        .set('content-type', 'application/json')
        .send('{"query":"subscription { orderChanged { id } }","extensions":{"operationId":"1"}}');
      const remove = await stream().delete('/graphql/stream?operationId=1').set(token);
      for (const res of [add, remove]) {
        assert.equal(res.status, 404, res.text);
        assert.deepEqual(errorsOf(res), [['Stream not found', 'NOT_FOUND']]);
      }
    });

    test('refusals graphql-sse sends without a body get one: 404 without a token, 409 for a token reserved twice, 405', async () => {
      const auth = { authorization: `Bearer ${alice}` };
      const noToken = await stream().post('/graphql/stream').set(auth).set('accept', 'application/json').send('');
      assert.equal(noToken.status, 404, noToken.text);
      assert.deepEqual(errorsOf(noToken)[0]![1], 'NOT_FOUND');
      const token = { ...auth, 'x-graphql-event-stream-token': `r-${Date.now()}` };
      const first = await stream().put('/graphql/stream').set(token);
      assert.equal(first.status, 201, first.text);
      const again = await stream().put('/graphql/stream').set(token);
      assert.equal(again.status, 409, again.text);
      assert.deepEqual(errorsOf(again), [['Stream already registered', 'BAD_REQUEST']]);
      const patch = await stream().patch('/graphql/stream').set(token);
      assert.equal(patch.status, 405, patch.text);
      assert.equal(patch.headers.allow, 'GET, POST, PUT, DELETE');
      assert.deepEqual(errorsOf(patch)[0]![1], 'METHOD_NOT_ALLOWED');
    });
  });
});
