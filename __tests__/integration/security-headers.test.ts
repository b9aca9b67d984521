import { createHash } from 'node:crypto';
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { WebClient, location, signIn, startLogin } from '../helpers/webClient.js';

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
    server = await startTestServer();
    base = server.running.publicUrl;
  });
  afterAll(() => server.close());

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
