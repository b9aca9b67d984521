import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { WebClient, location, signInAtIdp, startLogin } from '../helpers/webClient.js';

const CAP = 5;

describe('sign-in attempts an anonymous caller can make the server store', () => {
  let server: TestServer;
  beforeAll(async () => {
    // Behind one proxy hop the client address is the X-Forwarded-For entry the proxy added.
    server = await startTestServer({ LOGIN_ATTEMPTS_PER_IP: String(CAP), TRUST_PROXY: '1' });
  });
  afterAll(() => server?.close());

  const rows = async (ip?: string) =>
    (
      await server.running.app.db.query<{ n: number }>(
        `select count(*)::int as n from auth_login_attempts where $1::text is null or client_ip = $1`,
        [ip ?? null],
      )
    )[0]!.n;

  test('a flood of GET /auth/login from one address keeps at most LOGIN_ATTEMPTS_PER_IP rows for it', async () => {
    for (let i = 0; i < 60; i++) {
      await request(server.running.publicUrl).get('/auth/login').set('x-forwarded-for', '203.0.113.7').expect(302);
    }
    assert.equal(await rows('203.0.113.7'), CAP);
  });

  test('a flood from one address does not touch the sign-ins of another', async () => {
    const browser = new WebClient();
    const authorizationUrl = await startLogin(browser, server.running.publicUrl);
    for (let i = 0; i < 3 * CAP; i++) {
      await request(server.running.publicUrl).get('/auth/login').set('x-forwarded-for', '198.51.100.9').expect(302);
    }
    const callback = await signInAtIdp(browser, authorizationUrl, 'alice');
    assert.equal((await browser.get(callback)).status, 303, 'the earlier sign-in from 127.0.0.1 still completes');
    assert.ok((await rows()) <= 3 * CAP, 'storage stays bounded by addresses × LOGIN_ATTEMPTS_PER_IP');
  });

  test('the newest attempt of a flooded address still signs in', async () => {
    const browser = new WebClient();
    const started = await browser.get(`${server.running.publicUrl}/auth/login`, { 'x-forwarded-for': '203.0.113.7' });
    assert.equal(started.status, 302);
    const callback = await signInAtIdp(browser, location(started), 'bob');
    assert.equal((await browser.get(callback)).status, 303);
  });
});
