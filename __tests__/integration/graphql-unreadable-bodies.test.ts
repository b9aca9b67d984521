import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
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
});
