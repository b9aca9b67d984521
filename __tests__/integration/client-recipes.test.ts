import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { resumingSubscription } from '../../examples/sse-resume.js';
import { freshTokenClient } from '../../examples/ws-fresh-tokens.js';
import { resumingWsSubscription } from '../../examples/ws-resume.js';
import { rest } from '../helpers/openapi.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { idpSignedToken } from '../helpers/tokens.js';

const CREATED = 'subscription { orderCreated { id } }';

interface Created {
  orderCreated: { id: string };
}

/** What a sink received, and a way to wait for the n-th result. */
function collector() {
  const ids: string[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  let failure: unknown;
  return {
    ids,
    failure: () => failure,
    sink: {
      next(result: { data?: Created | null }) {
        ids.push(result.data!.orderCreated.id);
        for (const w of waiters.filter((w) => ids.length >= w.n)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      },
      error: (error: unknown) => (failure = error),
      complete: () => undefined,
    },
    received: (n: number) =>
      ids.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve })),
  };
}

/** A graphql-ws `closed` listener that notes each close's code and reason in `closes`. */
const recordClose = (closes: { code: number; reason: string }[]) => (event: unknown) => {
  const { code, reason } = event as { code: number; reason: string };
  closes.push({ code, reason });
};

async function place(server: TestServer, token: string): Promise<string> {
  const res = await rest(server.url, 'POST', '/orders', {
    token,
    body: { items: [{ sku: 'WC-005', qty: 1 }] },
    headers: { 'idempotency-key': randomUUID() },
  });
  assert.equal(res.status, 201);
  return res.json<{ id: string }>().id;
}

describe('the README client recipes, with the real clients', () => {
  let server: TestServer;
  let alice: string;
  let ws: string;
  beforeAll(async () => {
    server = await startTestServer();
    alice = await server.token('alice');
    ws = `${server.url.replace(/^http/, 'ws')}/graphql`;
  });

  /**
   * Once the replica has closed: an order placed while the client waits to retry (the one it must not miss), its
   * resubscription to the other replica, and an order placed after it; waits until all three have arrived.
   */
  async function missThenResume(letRetry: () => void, got: ReturnType<typeof collector>): Promise<[string, string]> {
    const missed = await place(server, alice);
    const relistening = server.nextSubscription();
    letRetry();
    await relistening;
    const live = await place(server, alice);
    await got.received(3);
    return [missed, live];
  }

  afterAll(() => server?.close());

  test('graphql-ws: when the token expires (4403) the client reconnects with a fresh token and keeps receiving', async () => {
    // The first connection gets a token with seconds to live; every later one the fresh token.
    const tokens = [await idpSignedToken(server, { sub: 'alice', expiresIn: 6 })];
    let asked = 0;
    const closes: { code: number; reason: string }[] = [];
    const client = freshTokenClient({
      url: ws,
      webSocketImpl: WebSocket,
      token: async () => (asked++, tokens.shift() ?? alice),
      // No backoff timer in a test: the retry starts at once.
      retryWait: async () => undefined,
      on: { closed: recordClose(closes) },
    });
    const got = collector();
    const listening = server.nextSubscription();
    const stop = client.subscribe<Created>({ query: CREATED }, got.sink);
    await listening;
    const relistening = server.nextSubscription();
    const first = await place(server, alice);
    await got.received(1);

    // The server ends the first connection when its token expires; the client's own retry subscribes again.
    await relistening;
    assert.deepEqual(closes, [{ code: 4403, reason: 'The access token has expired.' }]);
    const second = await place(server, alice);
    await got.received(2);
    assert.deepEqual(got.ids, [first, second]);
    assert.equal(asked, 2, 'connectionParams ran once per connection');
    assert.equal(got.failure(), undefined);
    stop();
    await client.dispose();
  });

  test('graphql-sse: after a drop the headers function sends Last-Event-ID and the missed event arrives first', async () => {
    // A replica that goes away mid-stream, and a second one over the same database that the client reconnects to.
    const replica = await startTestServer({ OIDC_ISSUER: server.running.app.issuer }, { sameDatabaseAs: server });
    let target = replica.url;
    let letRetry!: () => void;
    const retryAllowed = new Promise<void>((resolve) => (letRetry = resolve));
    const requests: Record<string, string>[] = [];
    const got = collector();
    const listening = replica.nextSubscription();
    const stop = resumingSubscription<Created>(
      {
        url: () => `${target}/graphql/stream`,
        token: async () => alice,
        // Instead of a backoff timer, the reconnect waits until the test has published what it must miss.
        retry: () => retryAllowed,
        fetchFn: (url: string, init: { headers: Record<string, string> }) => {
          requests.push(init.headers);
          return fetch(url, init);
        },
      },
      { query: CREATED },
      got.sink,
    );
    await listening;
    const first = await place(server, alice);
    await got.received(1);
    assert.equal(requests[0]!['last-event-id'], undefined);

    // The replica shuts down: its stream ends without `complete`, which graphql-sse retries.
    await replica.close();
    target = server.url;
    const [missed, live] = await missThenResume(letRetry, got);

    assert.deepEqual(got.ids, [first, missed, live]);
    assert.equal(requests.length, 2);
    assert.match(requests[1]!['last-event-id'] ?? '', /^\d+$/);
    assert.equal(requests[1]!.authorization, `Bearer ${alice}`);
    assert.equal(got.failure(), undefined);
    stop();
  });

  test('graphql-ws: a replica that shuts down closes with 1001; the client resubscribes with extensions.lastEventId and the missed event arrives first', async () => {
    const replica = await startTestServer({ OIDC_ISSUER: server.running.app.issuer }, { sameDatabaseAs: server });
    let target = replica.url;
    let letRetry!: () => void;
    const retryAllowed = new Promise<void>((resolve) => (letRetry = resolve));
    const closes: { code: number; reason: string }[] = [];
    const client = createClient({
      url: () => `${target.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${alice}` },
      // Instead of a backoff timer, the reconnect waits until the test has published what it must miss.
      retryWait: () => retryAllowed,
      on: { closed: recordClose(closes) },
    });
    const got = collector();
    const listening = replica.nextSubscription();
    const stop = resumingWsSubscription<Created>(client, { query: CREATED }, got.sink);
    await listening;
    const first = await place(server, alice);
    await got.received(1);

    await replica.close();
    assert.deepEqual(closes, [{ code: 1001, reason: 'Server shutting down' }]);
    target = server.url;
    const [missed, live] = await missThenResume(letRetry, got);

    assert.deepEqual(got.ids, [first, missed, live]);
    assert.equal(got.failure(), undefined);
    stop();
    await client.dispose();
  });

  test('graphql-ws: an extensions.lastEventId that is not an event id is refused with BAD_REQUEST', async () => {
    const client = createClient({
      url: ws,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${alice}` },
    });
    const refusals: unknown[] = [];
    for (const lastEventId of ['abc', '-1', '9223372036854775808', 12]) {
      refusals.push(
        await new Promise((resolve) =>
          client.subscribe(
            { query: CREATED, extensions: { lastEventId } },
            { next: resolve, error: resolve, complete: () => resolve('complete') },
          ),
        ),
      );
    }
    await client.dispose();
    const message =
      'extensions.lastEventId must be the id of an event this stream sent (a decimal integer up to 9223372036854775807).';
    assert.deepEqual(refusals, Array(4).fill([{ message, extensions: { code: 'BAD_REQUEST' } }]));
  });

  describe('connectionParams other than { authorization }', () => {
    async function closeFor(connectionParams: Record<string, unknown>) {
      let client!: ReturnType<typeof createClient>;
      const closed = await new Promise<{ code: number; reason: string }>((resolve) => {
        client = createClient({
          url: ws,
          webSocketImpl: WebSocket,
          lazy: false,
          retryAttempts: 0,
          connectionParams,
          on: {
            closed: (event) => {
              const { code, reason } = event as { code: number; reason: string };
              resolve({ code, reason });
            },
          },
          onNonLazyError: () => undefined,
        });
      });
      await client.dispose();
      return closed;
    }
    const REFUSED = /^Bad connectionParams: .*; send \{ "authorization": "Bearer <token>" \} or nothing$/;

    for (const [label, params, says] of [
      ['{ token }', () => ({ token: alice }), 'unknown key "token"'],
      [
        '{ headers: { Authorization } }',
        () => ({ headers: { Authorization: `Bearer ${alice}` } }),
        'unknown key "headers"',
      ],
      ['{ authorization: 123 }', () => ({ authorization: 123 }), 'authorization is not a string'],
      [
        'both spellings',
        () => ({ authorization: `Bearer ${alice}`, Authorization: `Bearer ${alice}` }),
        'both authorization and Authorization',
      ],
      ['a long non-ASCII key', () => ({ ['ключ'.repeat(40)]: 1 }), 'unknown key "????????????????????????"'],
    ] as const) {
      test(`${label} closes the connection with 4400 naming the accepted shape, never anonymous`, async () => {
        const closed = await closeFor(params());
        assert.equal(closed.code, 4400);
        assert.match(closed.reason, REFUSED);
        assert.ok(closed.reason.includes(says), closed.reason);
      });
    }

    test('{ Authorization } and no params at all are accepted', async () => {
      for (const connectionParams of [{ Authorization: `Bearer ${alice}` }, {}]) {
        const client = createClient({ url: ws, webSocketImpl: WebSocket, retryAttempts: 0, connectionParams });
        const result = await new Promise<{ data?: unknown }>((resolve, reject) =>
          client.subscribe({ query: '{ viewer { subject } }' }, { next: resolve, error: reject, complete: () => {} }),
        );
        assert.deepEqual(result.data, { viewer: 'Authorization' in connectionParams ? { subject: 'alice' } : null });
        await client.dispose();
      }
    });
  });
});
