import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { WebClient, signIn } from '../helpers/webClient.js';

const SESSION = 'orders_session';
const PRODUCTS = '{ products { sku } }';
const VIEWER = '{ viewer { subject } }';

/** Reads a whole text/event-stream answer (a query's stream ends after its one result). */
function eventStream(res: request.Response, done: (err: Error | null, body: string) => void) {
  // Inside a parser, superagent hands over the raw Node response stream.
  const stream = res as unknown as NodeJS.ReadableStream;
  let text = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => (text += chunk));
  stream.on('end', () => done(null, text));
}

function assertForgeryRefused(res: request.Response) {
  // With the event-stream parser the text is in `body`.
  const text = typeof res.body === 'string' ? res.body : res.text;
  assert.equal(res.status, 400, text);
  assert.match(res.headers['content-type'] ?? '', /^application\/json/);
  const body = JSON.parse(text) as { errors: { message: string; extensions: { code: string } }[] };
  assert.equal(body.errors[0]!.extensions.code, 'BAD_REQUEST');
  assert.match(body.errors[0]!.message, /cross-site request forgery/);
}

describe('one cookie-CSRF rule for /graphql and /graphql/stream, keyed on the session cookie', () => {
  let server: TestServer;
  let session: string;
  beforeAll(async () => {
    server = await startTestServer();
    const browser = new WebClient();
    const { response } = await signIn(browser, server.running.publicUrl, 'alice');
    assert.equal(response.status, 303);
    session = `${SESSION}=${browser.cookie(server.running.publicUrl, SESSION)!}`;
  });
  afterAll(() => server.close());

  test('a browser holding an unrelated theme=dark cookie reads public products with a simple GET /graphql', async () => {
    const res = await request(server.url)
      .get('/graphql')
      .query({ query: PRODUCTS })
      .set('cookie', 'theme=dark')
      .set('accept', 'application/json')
      .expect(200);
    assert.equal((res.body as { data: { products: unknown[] } }).data.products.length, 20);
  });

  test('a simple GET /graphql carrying the session cookie is refused, with other cookies beside it too', async () => {
    for (const cookie of [session, `theme=dark; ${session}`]) {
      const res = await request(server.url)
        .get('/graphql')
        .query({ query: VIEWER })
        .set('cookie', cookie)
        .set('accept', 'application/json');
      assertForgeryRefused(res);
    }
  });

  test('a simple GET /graphql/stream carrying the session cookie is refused as /graphql refuses it', async () => {
    const res = await request(server.url)
      .get('/graphql/stream')
      .query({ query: VIEWER })
      .set('cookie', session)
      .set('accept', 'text/event-stream')
      .buffer(true)
      .parse(eventStream);
    assertForgeryRefused(res);
  });

  test('a simple POST /graphql/stream (text/plain body) carrying the session cookie is refused', async () => {
    const res = await request(server.url)
      .post('/graphql/stream')
      .set('cookie', session)
      .set('content-type', 'text/plain')
      .set('accept', 'text/event-stream')
      .send(JSON.stringify({ query: VIEWER }))
      .buffer(true)
      .parse(eventStream);
    assertForgeryRefused(res);
  });

  test('GET /graphql/stream with the session cookie and a preflight header runs as the signed-in user', async () => {
    const res = await request(server.url)
      .get('/graphql/stream')
      .query({ query: VIEWER })
      .set('cookie', session)
      .set('accept', 'text/event-stream')
      .set('apollo-require-preflight', 'true')
      .buffer(true)
      .parse(eventStream)
      .expect(200);
    assert.match(res.body as string, /"viewer":\{"subject":"alice"\}/);
  });

  test('POST /graphql/stream as JSON with the session cookie runs (a JSON body needs a preflight)', async () => {
    const res = await request(server.url)
      .post('/graphql/stream')
      .set('cookie', session)
      .set('accept', 'text/event-stream')
      .send({ query: VIEWER })
      .buffer(true)
      .parse(eventStream)
      .expect(200);
    assert.match(res.body as string, /"viewer":\{"subject":"alice"\}/);
  });

  test('a simple GET /graphql/stream with only an unrelated cookie runs a public query', async () => {
    const res = await request(server.url)
      .get('/graphql/stream')
      .query({ query: PRODUCTS })
      .set('cookie', 'theme=dark')
      .set('accept', 'text/event-stream')
      .buffer(true)
      .parse(eventStream)
      .expect(200);
    assert.match(res.body as string, /"products":\[/);
  });

  test('the Sandbox landing page still opens for a signed-in browser', async () => {
    await request(server.url).get('/graphql').set('cookie', session).set('accept', 'text/html').expect(200);
  });
});
