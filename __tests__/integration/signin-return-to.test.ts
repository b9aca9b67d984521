import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { WebClient, signIn } from '../helpers/webClient.js';

/** Values a link could carry in returnTo to send a freshly signed-in browser somewhere else. */
const HOSTILE = [
  '//evil.example',
  '///evil.example',
  '/\\evil.example',
  '\\\\evil.example',
  '/.//evil.example',
  '/..//evil.example',
  '/%2e//evil.example',
  '/%2E%2E//evil.example',
  '/.%2e//evil.example',
  '/x/../..//evil.example',
  '/%2e%2e/%2e%2e//evil.example',
  '/./\\evil.example',
  '/%5cevil.example',
  '/%5c%5cevil.example',
  '/%2f%2fevil.example',
  '/%09/evil.example',
  '/\t/evil.example',
  '/\n/evil.example',
  '/\r\n//evil.example',
  '/\u0000//evil.example',
  ' //evil.example',
  'https://evil.example/',
  'http:evil.example',
  'http:/\\evil.example',
  'javascript:alert(1)',
  'data:text/html,<script>alert(1)</script>',
  'evil.example',
  '//evil.example@localhost',
  '/@evil.example',
];

/**
 * Where a browser goes with a Location header: a path on this site is one that resolves to this origin and that
 * no browser could re-read as another host (`//host`, `/\host`).
 */
function assertStaysOnSite(value: string | null, base: string, label: string) {
  assert.ok(value, `${label}: a Location`);
  assert.match(value, /^\/(?![/\\])/, `${label}: Location ${JSON.stringify(value)} is a plain path`);
  // eslint-disable-next-line no-control-regex -- control characters would be stripped by a browser's URL parser
  assert.doesNotMatch(value, /[\u0000-\u001f\u007f\\]/, `${label}: no control characters or backslashes`);
  assert.equal(new URL(value, base).origin, new URL(base).origin, label);
}

describe('sign-in sends the browser back only to a path on this site', () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = server.running.publicUrl;
  });
  afterAll(() => server.close());

  for (const returnTo of HOSTILE) {
    test(`returnTo ${JSON.stringify(returnTo)} is refused or lands on this site after signing in`, async () => {
      // Started on 127.0.0.1 (not PUBLIC_URL's host): checked first, then moved to PUBLIC_URL with the checked value.
      const direct = await request(server.url).get('/auth/login').query({ returnTo });
      if (direct.status === 400) {
        assert.match(direct.text, /returnTo must be a path on this site/);
        return;
      }
      assert.equal(direct.status, 303, direct.text);
      const moved = new URL(direct.headers.location!);
      assert.equal(`${moved.origin}${moved.pathname}`, `${base}/auth/login`);
      assertStaysOnSite(moved.searchParams.get('returnTo'), base, `moved ${JSON.stringify(returnTo)}`);
      const start = await request(base).get(`${moved.pathname}${moved.search}`);
      assert.equal(start.status, 302, start.text);
      const { response } = await signIn(new WebClient(), base, 'alice', returnTo);
      assert.equal(response.status, 303);
      assertStaysOnSite(response.headers.get('location'), base, JSON.stringify(returnTo));
    });
  }

  for (const [returnTo, expected] of [
    [undefined, '/'],
    ['/', '/'],
    ['/graphql?x=1', '/graphql?x=1'],
    ['/auth/session', '/auth/session'],
    ['/a/./b/../c?q=1&r=%2F', '/a/c?q=1&r=%2F'],
  ] as const) {
    test(`returnTo ${JSON.stringify(returnTo)} signs in and lands on ${expected}`, async () => {
      const { response } = await signIn(new WebClient(), base, 'alice', returnTo);
      assert.equal(response.status, 303);
      assert.equal(response.headers.get('location'), expected);
    });
  }
});
