import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('the embedded issuer names itself as configured, whatever the Host header says', () => {
  let server: TestServer;
  let issuer: string;
  beforeAll(async () => {
    server = await startTestServer();
    issuer = server.running.app.issuer;
  });
  afterAll(() => server.close());

  test('the discovery document names the configured issuer, whatever the Host header says', async () => {
    const res = await request(server.url)
      .get('/idp/.well-known/openid-configuration')
      .set('host', 'evil.example')
      .expect(200);
    const doc = res.body as Record<string, unknown>;
    assert.equal(doc.issuer, issuer);
    const urls = Object.entries(doc).filter(([, v]) => typeof v === 'string' && /^https?:/.test(v));
    assert.ok(urls.length >= 5, JSON.stringify(doc));
    for (const [name, url] of urls) assert.ok((url as string).startsWith(`${issuer}/`) || url === issuer, name);
  });

  test('the sign-out page posts to the configured issuer, whatever the Host header says', async () => {
    const res = await request(server.url).get('/idp/session/end').set('host', 'evil.example').expect(200);
    assert.match(res.text, /<form/);
    assert.doesNotMatch(res.text, /evil\.example/);
    assert.ok(res.text.includes(`${issuer}/session/end/confirm`), res.text);
  });
});

describe('behind a trusted proxy, a forged X-Forwarded-Host does not move the issuer', () => {
  let server: TestServer;
  let issuer: string;
  beforeAll(async () => {
    server = await startTestServer({ TRUST_PROXY: 'true' });
    issuer = server.running.app.issuer;
  });
  afterAll(() => server.close());

  for (const headers of [
    { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' },
    { host: 'evil.example', 'x-forwarded-host': 'evil.example, localhost' },
    { forwarded: 'host=evil.example;proto=https' },
  ]) {
    test(`discovery with ${JSON.stringify(headers)} names only the configured issuer`, async () => {
      const res = await request(server.url).get('/idp/.well-known/openid-configuration').set(headers).expect(200);
      const text = res.text;
      assert.doesNotMatch(text, /evil\.example/);
      assert.equal((res.body as { issuer: string }).issuer, issuer);
      assert.equal((res.body as { jwks_uri: string }).jwks_uri, `${issuer}/jwks`);
    });
  }
});
