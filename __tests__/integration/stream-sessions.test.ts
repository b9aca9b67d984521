import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startReplicas, stopReplicas, type TestServer } from '../helpers/server.js';
import { cookieClient, sseStream, within } from '../helpers/streams.js';
import { WebClient, signIn } from '../helpers/webClient.js';

const SESSION = 'orders_session';
/** The promise: every stream a session authenticated ends within 5 s of its end, on every replica. */
const BOUND_MS = 5_000;

async function sessionCookie(server: TestServer, user: string): Promise<string> {
  const browser = new WebClient();
  const { response } = await signIn(browser, server.running.publicUrl, user);
  assert.equal(response.status, 303);
  return `${SESSION}=${browser.cookie(server.running.publicUrl, SESSION)!}`;
}

/** POST /auth/logout with the cookie and the session's CSRF token, as the home page's form does. */
async function logout(server: TestServer, cookie: string): Promise<void> {
  const me = await request(server.url).get('/auth/session').set('cookie', cookie).expect(200);
  await request(server.url)
    .post('/auth/logout')
    .set('cookie', cookie)
    .type('form')
    .send({ csrf: (me.body as { csrfToken: string }).csrfToken })
    .expect(303);
}

/** A WebSocket holding a subscription and an SSE stream, both opened with the cookie on one replica. */
async function openStreams(server: TestServer, cookie: string) {
  const ws = cookieClient(server.url, cookie);
  await ws.connected;
  let wsError: unknown;
  ws.client.subscribe(
    { query: 'subscription { orderCreated { id } }' },
    { next: () => undefined, error: (e) => (wsError = e), complete: () => undefined },
  );
  const sse = await sseStream(server.url, { cookie });
  assert.equal(sse.res.status, 200);
  return { ws, sse, wsError: () => wsError };
}

describe('streams end with the browser session that opened them', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    ({ a, b } = await startReplicas());
  });
  afterAll(() => stopReplicas({ a, b }));

  test('logging out on A ends WebSocket (4403) and SSE streams on A and B', async () => {
    const cookie = await sessionCookie(a, 'alice');
    const onA = await openStreams(a, cookie);
    const onB = await openStreams(b, cookie);

    await logout(a, cookie);

    for (const [name, streams] of [
      ['A', onA],
      ['B', onB],
    ] as const) {
      const closed = await within(BOUND_MS, `the WebSocket on ${name} closing`, streams.ws.closed);
      assert.equal(closed.code, 4403, `WebSocket on ${name}`);
      assert.match(closed.reason, /session has ended/);
      const text = await within(BOUND_MS, `the SSE stream on ${name} ending`, streams.sse.text);
      assert.match(text, /\n?: closed: The session has ended \(signed out, expired or revoked\); sign in again\.\n\n$/);
    }

    // The cookie is dead everywhere: a new handshake with it is refused.
    const again = cookieClient(b.url, cookie);
    const refused = await again.closed;
    assert.equal(refused.code, 4403);
    assert.equal(refused.reason, 'Forbidden: the session has ended; sign in again');
  });

  test('a session whose absolute lifetime ends takes its streams with it on both replicas', async () => {
    const cookie = await sessionCookie(a, 'bob');
    const onA = await openStreams(a, cookie);
    const onB = await openStreams(b, cookie);
    const idHash = createHash('sha256')
      .update(cookie.slice(SESSION.length + 1))
      .digest('base64url');
    // Twelve hours pass in an instant: the session's absolute end is moved to just ahead of now.
    await a.running.app.db.query(
      `update auth_sessions set expires_at = now() + interval '1 second' where id_hash = $1`,
      [idHash],
    );

    for (const streams of [onA, onB]) {
      const closed = await within(BOUND_MS + 1_000, 'the WebSocket closing', streams.ws.closed);
      assert.equal(closed.code, 4403);
      assert.match(
        await within(BOUND_MS, 'the SSE stream ending', streams.sse.text),
        /: closed: The session has ended/,
      );
    }
  });

  test('streams of another session of the same person stay open', async () => {
    const leaving = await sessionCookie(a, 'carol');
    const staying = await sessionCookie(a, 'carol');
    const gone = await openStreams(b, leaving);
    const kept = cookieClient(b.url, staying);
    await kept.connected;
    await logout(a, leaving);
    assert.equal((await within(BOUND_MS, 'the WebSocket closing', gone.ws.closed)).code, 4403);
    await within(BOUND_MS, 'the SSE stream ending', gone.sse.text);
    // The other session's socket still answers queries after the first one's streams have ended.
    const result = await new Promise<unknown>((resolve, reject) =>
      kept.client.subscribe(
        { query: '{ recentOrders(first: 1) { id } }' },
        { next: resolve, error: reject, complete: () => undefined },
      ),
    );
    assert.ok((result as { data?: unknown }).data);
    await kept.client.dispose();
  });
});
