// The GraphQL clients: Apollo Client, the client recipes, paging the order connections, in one Jest file: a file loads
// its modules into a fresh context and costs about 1.5 s of CPU before its first test (docs/testing.md#how-long-it-
// takes). Each top-level describe block below was a test file of its own, named after it (the comment above it gives
// the old file name), with its tests unchanged; the three blocks' default servers are one (sharedServer below), and the
// replicas, the production server and the cost-ceiling server are started as before.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApolloClient, gql, HttpLink, InMemoryCache, type NormalizedCacheObject } from '@apollo/client';
import { createPersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { relayStylePagination } from '@apollo/client/utilities';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { resumingSubscription } from '../../examples/sse-resume.js';
import { freshTokenClient } from '../../examples/ws-fresh-tokens.js';
import { resumingWsSubscription } from '../../examples/ws-resume.js';
import { documentationFiles } from '../../scripts/readme/files.js';
import { newId } from '../../src/domain/ids.js';
import type { Queryable } from '../../src/store/db.js';
import { rest, type RestResponse } from '../helpers/openapi.js';
import { type GqlResponse, startTestServer, type TestServer } from '../helpers/server.js';
import { sharedTestServer } from '../helpers/sharedServer.js';
import { idpSignedToken } from '../helpers/tokens.js';

/**
 * The default server, for the blocks below that own their data (see the helper): Apollo Client's orders and persisted
 * queries of its own, the recipes' orders placed by each test while its subscription listens, and order-connections'
 * orders in years no other data reaches. Replicated: the production server and the recipes' replicas run over its
 * database, and without Redis they hear one another only through the outbox poll.
 */
const sharedServer = sharedTestServer({ replicated: true });

// ─── was __tests__/integration/apollo-client.test.ts ───
describe('apollo-client', () => {
  /** docs/graphql.md's recipe, verbatim: a hex SHA-256 from Web Crypto. */
  async function sha256(text: string): Promise<string> {
    const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
    return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
  }

  interface Exchange {
    method: string;
    url: URL;
    /** The request's Content-Type: Apollo Client sends one even on a GET, which keeps it from being a simple request. */
    contentType: string | null;
    status: number;
    cacheControl: string | null;
    body: { data?: unknown; errors?: { extensions?: { code?: string } }[] };
  }

  /**
   * The README's client (persisted-query link with GET over an HttpLink), with every HTTP exchange recorded; `link`
   * `plain` replaces the persisted-query link with a plain HttpLink's options.
   */
  function readmeClient(uri: string, token?: string, plain?: { useGETForQueries: boolean }) {
    const exchanges: Exchange[] = [];
    const recordingFetch: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      const url = new URL(String(input instanceof Request ? input.url : input));
      const body = (await res.clone().json()) as Exchange['body'];
      exchanges.push({
        method: init?.method ?? 'GET',
        url,
        contentType: new Headers(init?.headers).get('content-type'),
        status: res.status,
        cacheControl: res.headers.get('cache-control'),
        body,
      });
      return res;
    };
    const cache = new InMemoryCache();
    const http = new HttpLink({
      uri,
      fetch: recordingFetch,
      ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}),
      ...plain,
    });
    const client = new ApolloClient({
      cache,
      link: plain ? http : createPersistedQueryLink({ sha256, useGETForHashedQueries: true }).concat(http),
    });
    return { client, cache, exchanges };
  }

  /**
   * Every GraphQL document the documentation (README.md and docs/*.md) shows: the JSON bodies and GET URLs of its curl
   * examples and the `gql` templates of its Apollo Client section, so the test runs what a reader copies.
   */
  function readmeDocuments(): string[] {
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const readme = documentationFiles(root)
      .map((file) => readFileSync(path.join(root, file), 'utf8'))
      .join('\n');
    const fromBodies = [...readme.matchAll(/"query":"((?:[^"\\]|\\.)*)"/g)].map(
      (m) => JSON.parse(`"${m[1]}"`) as string,
    );
    const fromUrls = [...readme.matchAll(/\/graphql\?query=([^'\s&]+)/g)].map((m) => decodeURIComponent(m[1]!));
    const fromGql = [...readme.matchAll(/gql`([^`]*)`/g)].map((m) => m[1]!);
    return [...fromBodies, ...fromUrls, ...fromGql].filter((doc) => !doc.includes('…'));
  }

  /** Every place in the normalized store where an entity sits inline instead of behind a `__ref`. */
  function inlineEntities(store: NormalizedCacheObject, entityTypes: ReadonlySet<string>): string[] {
    const found: string[] = [];
    const walk = (value: unknown, path: string) => {
      if (Array.isArray(value)) return value.forEach((item, i) => walk(item, `${path}[${i}]`));
      if (!value || typeof value !== 'object') return;
      const typename = (value as { __typename?: unknown }).__typename;
      if (typeof typename === 'string' && entityTypes.has(typename)) found.push(`${path} (${typename})`);
      for (const [key, child] of Object.entries(value)) walk(child, `${path}.${key}`);
    };
    for (const [key, record] of Object.entries(store)) {
      for (const [field, value] of Object.entries(record ?? {})) walk(value, `${key}.${field}`);
    }
    return found;
  }

  describe('Apollo Client against the API', () => {
    let server: TestServer;
    /** Production asks more of a GET (CSRF prevention); the same client must work there unchanged. */
    let production: TestServer;
    let alice: string;
    let entityTypes: Set<string>;
    beforeAll(async () => {
      server = await sharedServer();
      alice = await server.token('alice');
      const { body } = await server.gql(
        '{ __schema { types { name kind fields { name type { kind ofType { name } } } } } }',
      );
      const types = (
        body.data as {
          __schema: {
            types: {
              name: string;
              kind: string;
              fields: { name: string; type: { kind: string; ofType: { name: string } | null } }[] | null;
            }[];
          };
        }
      ).__schema.types.filter((t) => t.kind === 'OBJECT' && !t.name.startsWith('__'));
      const hasId = (t: (typeof types)[number]) =>
        t.fields!.some((f) => f.name === 'id' && f.type.kind === 'NON_NULL' && f.type.ofType?.name === 'ID');
      entityTypes = new Set(types.filter(hasId).map((t) => t.name));
      production = await startTestServer(
        { NODE_ENV: 'production', OIDC_ISSUER: server.running.app.issuer },
        { sameDatabaseAs: server },
      );
      // Every object type is an entity with `id: ID!`, except the roots, OrderItem, a value kept inside its Order, and
      // WebhookEndpointWithSecret, a mutation's answer whose `endpoint` is the entity (the secret is never read again), and
      // a connection's pages (OrderConnection, OrderEdge, PageInfo), kept in their field (relayStylePagination merges them).
      assert.deepEqual(
        types
          .filter((t) => !hasId(t))
          .map((t) => t.name)
          .sort(),
        [
          'Mutation',
          'OrderConnection',
          'OrderEdge',
          'OrderItem',
          'PageInfo',
          'Query',
          'Subscription',
          'WebhookEndpointWithSecret',
        ],
      );
    });
    afterAll(() => production.close());

    test('every entity from the README queries and a mutation is normalized in InMemoryCache', async () => {
      const documents = readmeDocuments();
      assert.ok(
        documents.some((d) => d.includes('recentOrders')),
        'the README queries recentOrders',
      );
      assert.ok(
        documents.some((d) => d.includes('products')),
        'the README queries products',
      );
      assert.ok(
        documents.some((d) => d.includes('viewer')),
        'the README queries viewer',
      );
      const { client, cache } = readmeClient(`${server.url}/graphql`, alice);
      const created = await client.mutate({
        mutation: gql`
          mutation Place($input: CreateOrderInput!) {
            createOrder(input: $input) {
              id
              state
              customer {
                id
                name
              }
              items {
                sku
                qty
                product {
                  id
                  sku
                  name
                }
              }
            }
          }
        `,
        variables: { input: { items: [{ sku: 'KB-001', qty: 2 }] } },
      });
      const orderId = (created.data as { createOrder: { id: string } }).createOrder.id;
      for (const query of documents) {
        const { data } = await client.query({ query: gql(query), fetchPolicy: 'network-only' });
        assert.ok(data, query);
      }
      const { data } = await client.query({
        query: gql`
          query One($id: ID!) {
            order(id: $id) {
              id
              etag
              items {
                sku
                product {
                  id
                  priceCents
                }
              }
            }
          }
        `,
        variables: { id: orderId },
        fetchPolicy: 'network-only',
      });
      assert.equal((data as { order: { id: string } }).order.id, orderId);

      const store = cache.extract();
      assert.deepEqual(inlineEntities(store, entityTypes), []);
      // Each entity under its own key, and the roots pointing at them.
      const viewerKey = Object.keys(store).find((k) => k.startsWith('Viewer:'));
      assert.ok(viewerKey, 'the viewer is stored under Viewer:<id>');
      assert.equal(store[viewerKey]!.__typename, 'Viewer');
      assert.ok(store['Product:KB-001'], 'products are stored under Product:<sku>');
      assert.equal(store['Product:KB-001']!.sku, 'KB-001');
      assert.ok(store[`Order:${orderId}`], 'the new order is stored under Order:<id>');
      const customerRef = (store[`Order:${orderId}`]!.customer as { __ref: string }).__ref;
      assert.match(customerRef, /^Customer:cus_/);
      assert.equal(store[customerRef]!.name, 'Alice Adams');
      const products = store.ROOT_QUERY!.products as { __ref: string }[];
      assert.equal(products.length, 20);
      assert.ok(products.every((p) => /^Product:/.test(p.__ref)));
      assert.deepEqual(store.ROOT_QUERY!.viewer, { __ref: viewerKey });
    });

    test.each(['development', 'production'])(
      '%s: the persisted-query link sends hashes over GET, and public data comes back cacheable',
      async (mode) => {
        const { client, exchanges } = readmeClient(`${(mode === 'production' ? production : server).url}/graphql`);
        // A name of its own, so the hash is new to the server's persisted-query store (shared through Redis).
        const catalogue = gql(
          `query Catalogue_${randomBytes(6).toString('hex')} { products { id sku name priceCents } }`,
        );
        const first = await client.query({ query: catalogue, fetchPolicy: 'network-only' });
        assert.equal((first.data as { products: unknown[] }).products.length, 20);
        const second = await client.query({ query: catalogue, fetchPolicy: 'network-only' });
        assert.deepEqual(second.data, first.data);

        const summary = exchanges.map((e) => ({
          method: e.method,
          hashed: e.url.searchParams.has('extensions') || e.method === 'POST',
          fullText: e.url.searchParams.has('query'),
          status: e.status,
          cacheControl: e.cacheControl,
          code: e.body.errors?.[0]?.extensions?.code ?? null,
        }));
        assert.deepEqual(summary, [
          // Unknown hash: Apollo's answer, then the link's one retry with the text, which registers it.
          {
            method: 'GET',
            hashed: true,
            fullText: false,
            status: 200,
            cacheControl: 'private, no-cache, must-revalidate',
            code: 'PERSISTED_QUERY_NOT_FOUND',
          },
          {
            method: 'POST',
            hashed: true,
            fullText: false,
            status: 200,
            cacheControl: 'max-age=300, public',
            code: null,
          },
          // Known hash: a plain GET with no query text, which an HTTP cache or CDN may store for five minutes.
          {
            method: 'GET',
            hashed: true,
            fullText: false,
            status: 200,
            cacheControl: 'max-age=300, public',
            code: null,
          },
        ]);
        const hashedGet = exchanges[2]!.url;
        const extensions = JSON.parse(hashedGet.searchParams.get('extensions')!) as {
          persistedQuery: { version: number; sha256Hash: string };
        };
        assert.equal(extensions.persistedQuery.version, 1);
        assert.match(extensions.persistedQuery.sha256Hash, /^[0-9a-f]{64}$/);
      },
    );

    test('production: a query text sent by GET (useGETForQueries) runs, as Apollo Client sends it with a JSON Content-Type', async () => {
      const { client, exchanges } = readmeClient(`${production.url}/graphql`, undefined, { useGETForQueries: true });
      const { data } = await client.query({
        query: gql('query Skus { products { id sku } }'),
        fetchPolicy: 'network-only',
      });
      assert.equal((data as { products: unknown[] }).products.length, 20);
      assert.deepEqual(
        exchanges.map((e) => [
          e.method,
          e.url.searchParams.get('query')?.replace(/\s+/g, ' '),
          e.contentType,
          e.status,
        ]),
        [['GET', 'query Skus { products { id sku __typename } }', 'application/json', 200]],
      );
    });
  });
});

// ─── was __tests__/integration/client-recipes.test.ts ───
describe('client-recipes', () => {
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
      server = await sharedServer();
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
});

// ─── was __tests__/integration/order-connections.test.ts ───
describe('order-connections', () => {
  /** Orders this file owns: placed in years no other data reaches (the seed spans the last 90 days). */
  interface Seeded {
    id: string;
    customerId: string;
    status: string;
    sku: string;
    createdAt: string;
    updatedAt: string;
  }

  const HOUR = 3_600_000;
  const STATUSES = ['pending', 'paid', 'shipped', 'delivered', 'cancelled'];

  /** Inserts orders (one line each) in two statements, as the store writes them. */
  async function seed(db: Queryable, orders: readonly Seeded[]): Promise<void> {
    await db.query(
      `insert into orders (id, customer_id, status, total_cents, version, created_at, updated_at)
     select id, customer_id, status, 900, 1, created_at, updated_at
     from unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[])
       as o(id, customer_id, status, created_at, updated_at)`,
      [
        orders.map((o) => o.id),
        orders.map((o) => o.customerId),
        orders.map((o) => o.status),
        orders.map((o) => o.createdAt),
        orders.map((o) => o.updatedAt),
      ],
    );
    await db.query(
      `insert into order_items (order_id, line_no, sku, qty, unit_price_cents)
     select id, 1, sku, 1, 900 from unnest($1::text[], $2::text[]) as l(id, sku)`,
      [orders.map((o) => o.id), orders.map((o) => o.sku)],
    );
  }

  const CONNECTION = `query Orders($first: Int, $after: String, $last: Int, $before: String, $filter: OrderFilter, $orderBy: OrderOrder) {
  orders(first: $first, after: $after, last: $last, before: $before, filter: $filter, orderBy: $orderBy) {
    edges { cursor node { id } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    totalCount
  }
}`;

  interface Page {
    ids: string[];
    pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
    totalCount: number;
  }

  const codeOf = (res: GqlResponse) => res.body.errors?.[0]?.extensions?.code;
  const costOf = (res: GqlResponse) =>
    (res.body as { extensions?: { cost?: { complexity: number; requested: number } } }).extensions?.cost;

  describe('orders as connections, on GraphQL and REST', () => {
    let server: TestServer;
    let alice: string;
    let bob: string;
    let carol: string;
    let aliceId: string;
    let bobId: string;
    /** 24 orders in January 2001, alternating alice and bob; updated in the reverse order of their creation. */
    let window: Seeded[];
    const W = { createdAt: { gte: '2001-01-01T00:00:00.000Z', lt: '2001-02-01T00:00:00.000Z' } };

    beforeAll(async () => {
      server = await sharedServer();
      ({ alice, bob, carol } = await server.users());
      const customerOf = async (token: string) =>
        (
          (await server.gql('{ viewer { customer { id } } }', undefined, { token })).body.data as {
            viewer: { customer: { id: string } };
          }
        ).viewer.customer.id;
      aliceId = await customerOf(alice);
      bobId = await customerOf(bob);
      const start = Date.parse('2001-01-01T00:00:00.000Z');
      window = Array.from({ length: 24 }, (_, i) => ({
        id: newId('ord', start + i * HOUR),
        customerId: i % 2 ? bobId : aliceId,
        status: STATUSES[i % 5]!,
        sku: i % 3 === 0 ? 'MP-011' : 'KB-001',
        createdAt: new Date(start + i * HOUR).toISOString(),
        updatedAt: new Date(start + (60 - i) * HOUR).toISOString(),
      }));
      await seed(server.running.app.db, window);
    });

    const page = async (token: string, variables: Record<string, unknown>): Promise<Page> => {
      const res = await server.gql(CONNECTION, variables, { token });
      assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
      const { edges, pageInfo, totalCount } = (
        res.body.data as { orders: Page & { edges: { node: { id: string } }[] } }
      ).orders;
      return { ids: edges.map((e) => e.node.id), pageInfo, totalCount };
    };
    /** The window's orders that `keep` keeps, in the order asked for. */
    const expected = (
      keep: (o: Seeded) => boolean,
      field: 'createdAt' | 'updatedAt' = 'createdAt',
      direction: 'ASC' | 'DESC' = 'DESC',
    ) => {
      const sorted = window.filter(keep).sort((a, b) => (a[field] < b[field] ? -1 : 1));
      return (direction === 'DESC' ? sorted.reverse() : sorted).map((o) => o.id);
    };
    const all = () => true;

    test('pages forwards to the last page and back, with exact pageInfo, newest created first by default', async () => {
      const ids = expected(all);
      const p1 = await page(carol, { first: 10, filter: W });
      assert.deepEqual(p1.ids, ids.slice(0, 10));
      assert.deepEqual(
        { ...p1.pageInfo, startCursor: null, endCursor: null },
        {
          hasNextPage: true,
          hasPreviousPage: false,
          startCursor: null,
          endCursor: null,
        },
      );
      assert.equal(p1.totalCount, 24);
      const p2 = await page(carol, { first: 10, after: p1.pageInfo.endCursor, filter: W });
      assert.deepEqual(p2.ids, ids.slice(10, 20));
      assert.equal(p2.pageInfo.hasNextPage, true);
      assert.equal(p2.pageInfo.hasPreviousPage, true, 'exact when paging forwards too');
      const p3 = await page(carol, { first: 10, after: p2.pageInfo.endCursor, filter: W });
      assert.deepEqual(p3.ids, ids.slice(20));
      assert.deepEqual([p3.pageInfo.hasNextPage, p3.pageInfo.hasPreviousPage], [false, true]);

      const back1 = await page(carol, { last: 10, filter: W });
      assert.deepEqual(back1.ids, ids.slice(14));
      assert.deepEqual([back1.pageInfo.hasNextPage, back1.pageInfo.hasPreviousPage], [false, true]);
      const back2 = await page(carol, { last: 10, before: back1.pageInfo.startCursor, filter: W });
      assert.deepEqual(back2.ids, ids.slice(4, 14));
      assert.deepEqual([back2.pageInfo.hasNextPage, back2.pageInfo.hasPreviousPage], [true, true]);
      const back3 = await page(carol, { last: 10, before: back2.pageInfo.startCursor, filter: W });
      assert.deepEqual(back3.ids, ids.slice(0, 4));
      assert.deepEqual([back3.pageInfo.hasNextPage, back3.pageInfo.hasPreviousPage], [true, false]);
      // Edge cursors are positions: the start of one page continues into the next from there.
      const between = await page(carol, {
        first: 3,
        after: p2.pageInfo.startCursor,
        before: p3.pageInfo.startCursor,
        filter: W,
      });
      assert.deepEqual(between.ids, ids.slice(11, 14));
    });

    test('sorts by CREATED_AT and UPDATED_AT, ascending and descending', async () => {
      for (const field of ['CREATED_AT', 'UPDATED_AT'] as const) {
        for (const direction of ['ASC', 'DESC'] as const) {
          const got = await page(carol, { first: 100, filter: W, orderBy: { field, direction } });
          const key = field === 'CREATED_AT' ? 'createdAt' : 'updatedAt';
          assert.deepEqual(got.ids, expected(all, key, direction), `${field} ${direction}`);
        }
      }
      // Several statuses under a sort of their own, paged: one scan per status, merged in key order.
      const filter = { ...W, status: ['PAID', 'CANCELLED', 'PENDING'] };
      const orderBy = { field: 'UPDATED_AT', direction: 'ASC' };
      const want = expected((o) => ['paid', 'cancelled', 'pending'].includes(o.status), 'updatedAt', 'ASC');
      const first = await page(carol, { first: 7, filter, orderBy });
      const rest = await page(carol, { first: 7, after: first.pageInfo.endCursor, filter, orderBy });
      assert.deepEqual([...first.ids, ...rest.ids], want);
      assert.equal(rest.pageInfo.hasNextPage, false);
      assert.equal(first.totalCount, want.length);
    });

    test('filters by status, customer, SKU and creation range, each alone and together', async () => {
      const cases: [Record<string, unknown>, (o: Seeded) => boolean][] = [
        [{ status: ['PAID', 'SHIPPED'] }, (o) => o.status === 'paid' || o.status === 'shipped'],
        [{ status: ['DELIVERED'] }, (o) => o.status === 'delivered'],
        [{ customerId: bobId }, (o) => o.customerId === bobId],
        [{ sku: 'MP-011' }, (o) => o.sku === 'MP-011'],
        [
          { status: ['PENDING', 'DELIVERED'], customerId: aliceId, sku: 'MP-011' },
          (o) => ['pending', 'delivered'].includes(o.status) && o.customerId === aliceId && o.sku === 'MP-011',
        ],
        [
          { createdAt: { gte: window[5]!.createdAt, lt: window[9]!.createdAt } },
          (o) => o.createdAt >= window[5]!.createdAt && o.createdAt < window[9]!.createdAt,
        ],
      ];
      for (const [extra, keep] of cases) {
        const got = await page(carol, { first: 100, filter: { ...W, ...extra } });
        const want = expected(keep);
        assert.ok(want.length > 0 || 'createdAt' in extra, 'each case selects something');
        assert.deepEqual(got.ids, want, JSON.stringify(extra));
        assert.equal(got.totalCount, want.length);
      }
    });

    test('the sku filter pages alike whether the SKU is unknown, rare or on more lines than a page may sort', async () => {
      // store/orderPages.ts serves a SKU on at most 5,000 order lines from its lines, a commoner one along the sort index:
      // 5,001 orders of 1980 with SD-015 make it common, 3 of them also hold PB-016 (rare).
      const start = Date.parse('1980-01-01T00:00:00.000Z');
      const common = Array.from({ length: 5_001 }, (_, i) => ({
        id: newId('ord', start + i * 60_000),
        customerId: i % 2 ? bobId : aliceId,
        status: STATUSES[i % 5]!,
        sku: 'SD-015',
        createdAt: new Date(start + i * 60_000).toISOString(),
        updatedAt: new Date(start + (6_000 - i) * 60_000).toISOString(),
      }));
      await seed(server.running.app.db, common);
      const rare = [4_990, 4_995, 5_000].map((i) => common[i]!);
      await server.running.app.db.query(
        `insert into order_items (order_id, line_no, sku, qty, unit_price_cents)
       select id, 2, 'PB-016', 1, 900 from unnest($1::text[]) as l(id)`,
        [rare.map((o) => o.id)],
      );
      const Y = { createdAt: { gte: '1980-01-01T00:00:00.000Z', lt: '1981-01-01T00:00:00.000Z' } };
      const newest = (orders: typeof common, keep: (o: Seeded) => boolean = () => true) =>
        orders
          .filter(keep)
          .map((o) => o.id)
          .reverse();
      const none = { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null };

      // Unknown, and known but on no order of the year.
      for (const filter of [{ sku: 'NO-SUCH-SKU' }, { ...Y, sku: 'NO-SUCH-SKU' }, { ...Y, sku: 'WC-005' }]) {
        assert.deepEqual(await page(carol, { first: 10, filter }), { ids: [], pageInfo: none, totalCount: 0 });
      }
      const rareIds = newest(rare);
      const r1 = await page(carol, { first: 2, filter: { ...Y, sku: 'PB-016' } });
      assert.deepEqual(
        [r1.ids, r1.pageInfo.hasNextPage, r1.pageInfo.hasPreviousPage, r1.totalCount],
        [rareIds.slice(0, 2), true, false, 3],
      );
      const r2 = await page(carol, { first: 2, after: r1.pageInfo.endCursor, filter: { ...Y, sku: 'PB-016' } });
      assert.deepEqual([r2.ids, r2.pageInfo.hasNextPage, r2.pageInfo.hasPreviousPage], [rareIds.slice(2), false, true]);
      const rBack = await page(carol, { last: 2, before: r2.pageInfo.startCursor, filter: { ...Y, sku: 'PB-016' } });
      assert.deepEqual(
        [rBack.ids, rBack.pageInfo.hasNextPage, rBack.pageInfo.hasPreviousPage],
        [rareIds.slice(0, 2), true, false],
      );
      const alicesRare = await page(alice, {
        first: 5,
        filter: { ...Y, sku: 'PB-016', status: ['PENDING', 'DELIVERED'] },
      });
      assert.deepEqual(
        alicesRare.ids,
        newest(rare, (o) => o.customerId === aliceId && ['pending', 'delivered'].includes(o.status)),
      );

      const all = newest(common);
      const c1 = await page(carol, { first: 100, filter: { ...Y, sku: 'SD-015' } });
      assert.deepEqual(
        [c1.ids, c1.pageInfo.hasNextPage, c1.pageInfo.hasPreviousPage, c1.totalCount],
        [all.slice(0, 100), true, false, 5_001],
      );
      const c2 = await page(carol, { first: 100, after: c1.pageInfo.endCursor, filter: { ...Y, sku: 'SD-015' } });
      assert.deepEqual(
        [c2.ids, c2.pageInfo.hasNextPage, c2.pageInfo.hasPreviousPage],
        [all.slice(100, 200), true, true],
      );
      const cLast = await page(carol, { last: 3, filter: { ...Y, sku: 'SD-015' } });
      assert.deepEqual(
        [cLast.ids, cLast.pageInfo.hasNextPage, cLast.pageInfo.hasPreviousPage],
        [all.slice(-3), false, true],
      );
      const filter = { ...Y, sku: 'SD-015', status: ['CANCELLED', 'PAID'], customerId: bobId };
      const orderBy = { field: 'UPDATED_AT', direction: 'ASC' };
      const want = common
        .filter((o) => o.customerId === bobId && ['cancelled', 'paid'].includes(o.status))
        .sort((a, b) => (a.updatedAt < b.updatedAt ? -1 : 1))
        .map((o) => o.id);
      const s1 = await page(carol, { first: 100, filter, orderBy });
      const s2 = await page(carol, { first: 100, after: s1.pageInfo.endCursor, filter, orderBy });
      assert.deepEqual([...s1.ids, ...s2.ids], want.slice(0, 200));
      assert.equal(s1.totalCount, want.length);
    }, 60_000);

    test('a cursor whose order was cancelled out of the filter still pages on, with exact hasPreviousPage', async () => {
      // The page is read from the cursor's own order; when that order has left the list, one more statement looks behind.
      const start = Date.parse('2004-01-01T00:00:00.000Z');
      const mine = Array.from({ length: 6 }, (_, i) => ({
        id: newId('ord', start + i * HOUR),
        customerId: aliceId,
        status: 'pending',
        sku: 'CB-007',
        createdAt: new Date(start + i * HOUR).toISOString(),
        updatedAt: new Date(start + i * HOUR).toISOString(),
      }));
      await seed(server.running.app.db, mine);
      const ids = mine.map((o) => o.id).reverse();
      const filter = {
        createdAt: { gte: '2004-01-01T00:00:00.000Z', lt: '2005-01-01T00:00:00.000Z' },
        status: ['PENDING'],
      };
      const cancel = async (id: string) => {
        const res = await rest(server.url, 'PATCH', `/orders/${id}`, {
          token: alice,
          body: { status: 'cancelled' },
          headers: { 'if-match': `"${id}.v1"` },
        });
        assert.equal(res.status, 200, res.text);
      };
      const p1 = await page(alice, { first: 2, filter });
      assert.deepEqual(p1.ids, ids.slice(0, 2));
      const live = await page(alice, { first: 2, after: p1.pageInfo.endCursor, filter });
      assert.deepEqual(
        [live.ids, live.pageInfo.hasPreviousPage, live.pageInfo.hasNextPage],
        [ids.slice(2, 4), true, true],
      );
      await cancel(ids[1]!);
      const gone = await page(alice, { first: 2, after: p1.pageInfo.endCursor, filter });
      assert.deepEqual(
        [gone.ids, gone.pageInfo.hasPreviousPage, gone.pageInfo.hasNextPage],
        [ids.slice(2, 4), true, true],
      );
      await cancel(ids[0]!);
      // Nothing at or before the first order's position is left in the list.
      const first = await page(alice, { first: 2, after: p1.pageInfo.startCursor, filter });
      assert.deepEqual(
        [first.ids, first.pageInfo.hasPreviousPage, first.pageInfo.hasNextPage],
        [ids.slice(2, 4), false, true],
      );
      const back = await page(alice, { last: 3, before: live.pageInfo.endCursor, filter });
      assert.deepEqual(
        [back.ids, back.pageInfo.hasPreviousPage, back.pageInfo.hasNextPage],
        [ids.slice(2, 3), false, true],
      );
    });

    test('an empty page has no cursors and no neighbours', async () => {
      const got = await page(carol, {
        first: 5,
        filter: { createdAt: { gte: '1999-01-01T00:00:00Z', lt: '2000-01-01T00:00:00Z' } },
      });
      assert.deepEqual(got, {
        ids: [],
        pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null },
        totalCount: 0,
      });
    });

    test('first and last at the limit pass; one past it, both together, or a cursor of another list are BAD_USER_INPUT', async () => {
      assert.equal((await page(carol, { first: 100, filter: W })).ids.length, 24);
      assert.equal((await page(carol, { last: 100, filter: W })).ids.length, 24);
      const refused = async (variables: Record<string, unknown>, message: string, pointer: string) => {
        const res = await server.gql(CONNECTION, variables, { token: carol });
        assert.equal(codeOf(res), 'BAD_USER_INPUT', JSON.stringify(res.body));
        assert.equal(res.body.errors![0]!.message, message);
        assert.deepEqual(res.body.errors![0]!.extensions!.invalid, [
          { pointer, reason: message.slice(pointer.length + 2) },
        ]);
        assert.equal(res.body.data, null);
      };
      await refused(
        { first: 101 },
        "/first: at most 100 orders a page; ask for 100 and continue from the page's cursor",
        '/first',
      );
      await refused(
        { last: 101 },
        "/last: at most 100 orders a page; ask for 100 and continue from the page's cursor",
        '/last',
      );
      await refused(
        { first: 5, last: 5 },
        '/last: give first (to page forwards) or last (to page backwards), not both',
        '/last',
      );
      const paid = await page(carol, { first: 2, filter: { ...W, status: ['PAID'] } });
      const another =
        'was issued for another filter or sort; send the filter and sort it came with, or start without a cursor';
      await refused(
        { first: 2, after: paid.pageInfo.endCursor, filter: { ...W, status: ['SHIPPED'] } },
        `/after: ${another}`,
        '/after',
      );
      await refused(
        {
          first: 2,
          after: paid.pageInfo.endCursor,
          filter: { ...W, status: ['PAID'] },
          orderBy: { field: 'UPDATED_AT', direction: 'DESC' },
        },
        `/after: ${another}`,
        '/after',
      );
      await refused({ last: 2, before: 'bm90LWEtY3Vyc29y' }, '/before: is not a cursor this API issued', '/before');
      await refused(
        { first: 2, filter: { status: [] } },
        '/filter/status: must name one or more of pending, paid, shipped, delivered, cancelled',
        '/filter/status',
      );
    });

    test('a customer sees only their own orders: by filter, by node(id:) and nodes(ids:)', async () => {
      const own = await page(alice, { first: 100, filter: W });
      assert.deepEqual(
        own.ids,
        expected((o) => o.customerId === aliceId),
      );
      const others = await page(alice, { first: 100, filter: { ...W, customerId: bobId } });
      assert.deepEqual(others, {
        ids: [],
        pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null },
        totalCount: 0,
      });
      const bobsOrder = window.find((o) => o.customerId === bobId)!.id;
      const alicesOrder = window.find((o) => o.customerId === aliceId)!.id;
      const NODES = `query($id: ID!, $ids: [ID!]!) {
      node(id: $id) { __typename id ... on Order { state } }
      nodes(ids: $ids) { __typename id }
    }`;
      const ids = [alicesOrder, bobsOrder, 'ord_nope', aliceId, bobId];
      const asAlice = await server.gql(NODES, { id: bobsOrder, ids }, { token: alice });
      assert.equal(asAlice.body.errors, undefined);
      assert.deepEqual(asAlice.body.data, {
        node: null,
        nodes: [{ __typename: 'Order', id: alicesOrder }, null, null, { __typename: 'Customer', id: aliceId }, null],
      });
      const asStaff = await server.gql(NODES, { id: bobsOrder, ids }, { token: carol });
      assert.deepEqual((asStaff.body.data as { node: unknown }).node, {
        __typename: 'Order',
        id: bobsOrder,
        state: 'PAID',
      });
      assert.deepEqual((asStaff.body.data as { nodes: unknown[] }).nodes, [
        { __typename: 'Order', id: alicesOrder },
        { __typename: 'Order', id: bobsOrder },
        null,
        { __typename: 'Customer', id: aliceId },
        { __typename: 'Customer', id: bobId },
      ]);
      // A customer's connection, reached through node: staff see bob's; alice cannot reach bob at all.
      const THROUGH = `query($id: ID!, $filter: OrderFilter) {
      node(id: $id) { ... on Customer { ordersConnection(first: 3, filter: $filter) { nodes { id } } } }
    }`;
      const bobs = await server.gql(THROUGH, { id: bobId, filter: W }, { token: carol });
      assert.deepEqual(bobs.body.data, {
        node: {
          ordersConnection: {
            nodes: expected((o) => o.customerId === bobId)
              .slice(0, 3)
              .map((id) => ({ id })),
          },
        },
      });
      assert.deepEqual((await server.gql(THROUGH, { id: bobId, filter: W }, { token: alice })).body.data, {
        node: null,
      });

      const many = (n: number) => Array.from({ length: n }, () => alicesOrder);
      const hundred = await server.gql(
        'query($ids: [ID!]!) { nodes(ids: $ids) { id } }',
        { ids: many(100) },
        { token: alice },
      );
      assert.equal((hundred.body.data as { nodes: unknown[] }).nodes.length, 100);
      const tooMany = await server.gql(
        'query($ids: [ID!]!) { nodes(ids: $ids) { id } }',
        { ids: many(101) },
        { token: alice },
      );
      assert.equal(codeOf(tooMany), 'BAD_USER_INPUT');
      assert.equal(tooMany.body.errors![0]!.message, '/ids: at most 100 ids; ask for the rest in another request');
    });

    test('a page of orders with their customers is 2 SQL statements for 1 order or 100, from a cursor or not', async () => {
      const q = `query($first: Int, $after: String, $filter: OrderFilter) { orders(first: $first, after: $after, filter: $filter) { nodes { id customer { name } } } }`;
      const after = (await page(carol, { first: 1, filter: W })).pageInfo.endCursor;
      for (const [first, cursor, length] of [
        [1, null, 1],
        [24, null, 24],
        [100, null, 24],
        [1, after, 1],
        [100, after, 23],
      ] as const) {
        const { res, statements } = await server.sqlStatementsOf((agent) =>
          agent
            .post('/graphql')
            .set({ 'content-type': 'application/json', authorization: `Bearer ${carol}` })
            .send(JSON.stringify({ query: q, variables: { first, after: cursor, filter: W } })),
        );
        assert.equal((res.body as { data: { orders: { nodes: unknown[] } } }).data.orders.nodes.length, length);
        assert.equal(statements, 2, `first: ${first}, after: ${cursor}`);
      }
    });

    test('a connection costs its page size: first: 100 over edges, last: 100 over nodes', async () => {
      const cost = async (query: string) => {
        const res = await server.gql(query, undefined, { token: carol });
        assert.equal(res.body.errors, undefined);
        return costOf(res)!;
      };
      assert.deepEqual(
        (({ complexity, requested }) => ({ complexity, requested }))(
          await cost('{ orders(first: 100) { edges { node { id } } } }'),
        ),
        { complexity: 201, requested: 3 },
      );
      assert.deepEqual(
        (({ complexity, requested }) => ({ complexity, requested }))(
          await cost('{ orders(last: 100) { nodes { id } } }'),
        ),
        { complexity: 101, requested: 2 },
      );
    });

    /** GET /v1/orders, checked against the served OpenAPI document. */
    const list = (token: string, query: string) => rest(server.url, 'GET', `/orders${query}`, { token });
    const idsOf = (res: RestResponse) => res.json<{ orders: { id: string }[] }>().orders.map((o) => o.id);
    const linkOf = (res: RestResponse, rel: string) =>
      [...(res.headers.get('link') ?? '').matchAll(/<([^>]+)>; rel="(\w+)"/g)].find((m) => m[2] === rel)?.[1];
    const WQ = `created%5Bgte%5D=${W.createdAt.gte}&created%5Blt%5D=${W.createdAt.lt}`;

    test('REST lists the same orders as GraphQL for one filter, paging with Link next and prev', async () => {
      const gqlIds = (
        await page(carol, {
          first: 100,
          filter: { ...W, status: ['PAID', 'SHIPPED', 'PENDING'] },
          orderBy: { field: 'UPDATED_AT', direction: 'ASC' },
        })
      ).ids;
      const restIds: string[] = [];
      const pages: RestResponse[] = [];
      let next: string | undefined = `/orders?status=paid,shipped,pending&${WQ}&order=updated_at&limit=4`;
      while (next) {
        const res = await rest(server.url, 'GET', next.replace(/^\/v1/, ''), { token: carol });
        assert.equal(res.status, 200, res.text);
        pages.push(res);
        restIds.push(...idsOf(res));
        next = linkOf(res, 'next');
      }
      assert.deepEqual(restIds, gqlIds);
      assert.equal(pages.length, Math.ceil(gqlIds.length / 4));
      assert.equal(linkOf(pages[0]!, 'prev'), undefined);
      assert.equal(pages.at(-1)!.json<{ next_cursor: unknown }>().next_cursor, null);
      // prev from the second page is the first page again.
      const prev = await rest(server.url, 'GET', linkOf(pages[1]!, 'prev')!.replace(/^\/v1/, ''), { token: carol });
      assert.deepEqual(idsOf(prev), idsOf(pages[0]!));
      assert.equal(linkOf(prev, 'prev'), undefined);
      assert.equal(linkOf(prev, 'next'), linkOf(pages[0]!, 'next'));

      const bobs = await list(carol, `?customer_id=${bobId}&sku=MP-011&${WQ}&order=-created_at`);
      assert.deepEqual(
        idsOf(bobs),
        expected((o) => o.customerId === bobId && o.sku === 'MP-011'),
      );
      // A customer naming someone else gets an empty list, not an error.
      const notMine = await list(alice, `?customer_id=${bobId}&${WQ}`);
      assert.equal(notMine.status, 200);
      assert.deepEqual(notMine.json(), { orders: [], next_cursor: null });
      // limit above 100 behaves as 100, as released.
      assert.equal(idsOf(await list(carol, '?limit=101')).length, 100);
    });

    test('a REST cursor issued before lists could be filtered still pages the default list, and no other', async () => {
      const from = window[7]!;
      const legacy = Buffer.from(JSON.stringify([from.createdAt, from.id])).toString('base64url');
      const want = (
        await server.running.app.db.query<{ id: string }>(
          `select id from orders where (created_at, id) < ($1::timestamptz, $2) order by created_at desc, id desc limit 3`,
          [from.createdAt, from.id],
        )
      ).map((r) => r.id);
      const res = await list(carol, `?limit=3&cursor=${legacy}`);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(idsOf(res), want);
      const filtered = await list(carol, `?status=paid&limit=3&cursor=${legacy}`);
      assert.equal(filtered.status, 400);
      assert.deepEqual(filtered.json<{ errors: unknown }>().errors, [
        {
          pointer: '/cursor',
          reason:
            'was issued for another filter or sort; send the filter and sort it came with, or start without a cursor',
        },
      ]);
    });

    test('REST refuses unknown parameters and malformed values with 400 naming the parameter', async () => {
      const paid = await list(carol, `?status=paid&${WQ}&limit=1`);
      const cursor = paid.json<{ next_cursor: string }>().next_cursor;
      const cases: [string, string, string][] = [
        [
          '?state=paid',
          '/state',
          'is not a parameter of this list; it takes limit, cursor, status, created[gte], created[lt], customer_id, sku, order',
        ],
        ['?status=paid,lost', '/status', 'must name one or more of pending, paid, shipped, delivered, cancelled'],
        [
          '?status=paid&status=shipped',
          '/status',
          'must be given once (statuses: comma-separated, status=paid,shipped)',
        ],
        ['?created%5Bgte%5D=yesterday', '/created[gte]', 'must be an RFC 3339 date-time such as 2026-11-22T09:30:00Z'],
        ['?order=total', '/order', 'must be one of created_at, -created_at, updated_at, -updated_at'],
        ['?order=toString', '/order', 'must be one of created_at, -created_at, updated_at, -updated_at'],
        [
          '?__proto__=x',
          '/__proto__',
          'is not a parameter of this list; it takes limit, cursor, status, created[gte], created[lt], customer_id, sku, order',
        ],
        ['?customer_id=alice', '/customer_id', 'must be a customer id such as cus_01jd…'],
        ['?limit=0', '/limit', 'must be a whole number from 1 to 100'],
        ['?cursor=abc', '/cursor', 'is not a cursor this API issued'],
        [
          `?status=shipped&${WQ}&cursor=${cursor}`,
          '/cursor',
          'was issued for another filter or sort; send the filter and sort it came with, or start without a cursor',
        ],
      ];
      for (const [query, pointer, reason] of cases) {
        const res = await list(carol, query);
        assert.equal(res.status, 400, query);
        assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
        const body = res.json<{ code: string; errors: unknown; detail: string }>();
        assert.equal(body.code, 'MALFORMED_REQUEST');
        assert.deepEqual(body.errors, [{ pointer, reason }], query);
        assert.equal(body.detail, `${pointer.slice(1)} ${reason}`);
      }
    });

    test('a customer paging their own orders gets each exactly once, in order, while new ones are placed', async () => {
      const start = Date.parse('2002-01-01T00:00:00.000Z');
      const mine = Array.from({ length: 250 }, (_, i) => ({
        id: newId('ord', start + i * 60_000),
        customerId: aliceId,
        status: STATUSES[i % 5]!,
        sku: 'CB-007',
        createdAt: new Date(start + i * 60_000).toISOString(),
        updatedAt: new Date(start + i * 60_000).toISOString(),
      }));
      await seed(server.running.app.db, mine);
      const db = server.running.app.db;
      const snapshot = async () =>
        (
          await db.query<{ id: string }>('select id from orders where customer_id = $1 order by created_at, id', [
            aliceId,
          ])
        ).map((r) => r.id);
      const before = await snapshot();
      assert.ok(before.length >= 262, 'the 250, the window and the seed');
      const seen: string[] = [];
      const placed: string[] = [];
      let after: string | null = null;
      for (;;) {
        const got = await page(alice, { first: 100, after, orderBy: { field: 'CREATED_AT', direction: 'ASC' } });
        seen.push(...got.ids);
        if (!got.pageInfo.hasNextPage) break;
        after = got.pageInfo.endCursor;
        for (let i = 0; i < 2; i++) {
          const res = await rest(server.url, 'POST', '/orders', {
            token: alice,
            body: { items: [{ sku: 'CB-007', qty: 1 }] },
            headers: { 'idempotency-key': randomUUID() },
          });
          assert.equal(res.status, 201);
          placed.push(res.json<{ id: string }>().id);
        }
      }
      const now = await snapshot();
      assert.deepEqual(now, [...before, ...now.slice(before.length)]);
      assert.deepEqual([...now.slice(before.length)].sort(), [...placed].sort());
      assert.deepEqual(seen, now, 'every order once, in order, the ones placed meanwhile at the end');
    });

    test('Apollo Client (relayStylePagination + fetchMore) and a fetch loop over REST Link headers page 2,000 orders alike', async () => {
      const start = Date.parse('2003-01-01T00:00:00.000Z');
      const many = Array.from({ length: 2000 }, (_, i) => ({
        id: newId('ord', start + i * 1000),
        customerId: i % 3 ? bobId : aliceId,
        status: STATUSES[i % 5]!,
        sku: 'HB-014',
        createdAt: new Date(start + i * 1000).toISOString(),
        updatedAt: new Date(start + i * 1000).toISOString(),
      }));
      await seed(server.running.app.db, many);
      const range = { gte: '2003-01-01T00:00:00.000Z', lt: '2004-01-01T00:00:00.000Z' };

      const client = new ApolloClient({
        cache: new InMemoryCache({
          typePolicies: { Query: { fields: { orders: relayStylePagination(['filter', 'orderBy']) } } },
        }),
        link: new HttpLink({ uri: `${server.url}/graphql`, headers: { authorization: `Bearer ${carol}` } }),
      });
      const QUERY = gql`
        query Orders($after: String, $filter: OrderFilter) {
          orders(first: 100, after: $after, filter: $filter) {
            edges {
              cursor
              node {
                id
              }
            }
            pageInfo {
              hasNextPage
              endCursor
            }
          }
        }
      `;
      type Data = {
        orders: { edges: { node: { id: string } }[]; pageInfo: { hasNextPage: boolean; endCursor: string } };
      };
      const watched = client.watchQuery<Data>({ query: QUERY, variables: { filter: { createdAt: range } } });
      const subscription = watched.subscribe(() => undefined);
      let pageInfo = (await watched.refetch()).data!.orders.pageInfo;
      let fetches = 1;
      while (pageInfo.hasNextPage && fetches < 25) {
        // fetchMore answers with the page it fetched; relayStylePagination merges it into the cached list.
        pageInfo = (await watched.fetchMore({ variables: { after: pageInfo.endCursor } })).data!.orders.pageInfo;
        fetches++;
      }
      const data = client.readQuery<Data>({ query: QUERY, variables: { filter: { createdAt: range } } })!;
      subscription.unsubscribe();
      const apolloIds = data.orders.edges.map((e) => e.node.id);
      assert.equal(fetches, 20);

      const restIds: string[] = [];
      let url: string | undefined =
        `${server.url}/v1/orders?created%5Bgte%5D=${range.gte}&created%5Blt%5D=${range.lt}&limit=100`;
      while (url) {
        const res = await fetch(url, { headers: { authorization: `Bearer ${carol}` } });
        assert.equal(res.status, 200);
        restIds.push(...((await res.json()) as { orders: { id: string }[] }).orders.map((o) => o.id));
        const next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
        url = next ? `${server.url}${next}` : undefined;
      }
      const want = many.map((o) => o.id).reverse();
      assert.deepEqual(apolloIds, want);
      assert.deepEqual(restIds, want);
    }, 120_000);
  });

  describe('connections under a cost ceiling and the result cache', () => {
    let server: TestServer;
    let alice: string;
    beforeAll(async () => {
      server = await startTestServer({ MAX_QUERY_COST: '100', RESULT_CACHE: 'on' });
      alice = await server.token('alice');
    });
    afterAll(() => server.close());

    test('a connection page over MAX_QUERY_COST is refused with its cost before it runs; one at it passes', async () => {
      const refused = async (query: string, complexity: number) => {
        const res = await server.gql(query, undefined, { token: alice });
        assert.equal(codeOf(res), 'QUERY_TOO_COMPLEX');
        assert.deepEqual(res.body.errors![0]!.extensions!.cost, { complexity, maximum: 100 });
        assert.equal(res.body.data, undefined);
      };
      await refused('{ orders(first: 100) { edges { node { id } } } }', 201);
      await refused('{ orders(last: 100) { nodes { id } } }', 101);
      const atLimit = await server.gql('{ orders(last: 99) { nodes { id } } }', undefined, { token: alice });
      assert.equal(atLimit.body.errors, undefined);
      assert.equal(costOf(atLimit)!.complexity, 100);
    });

    test('with RESULT_CACHE=on, a write shows at once through totalCount and through node(id:)', async () => {
      const COUNT = '{ orders { totalCount } }';
      const count = async () =>
        ((await server.gql(COUNT, undefined, { token: alice })).body.data as { orders: { totalCount: number } }).orders
          .totalCount;
      const before = await count();
      const hits = await server.counter('result_cache_hits_total');
      assert.equal(await count(), before);
      assert.equal(await server.counter('result_cache_hits_total'), hits + 1, 'the second read was a hit');
      const created = await rest(server.url, 'POST', '/orders', {
        token: alice,
        body: { items: [{ sku: 'KB-001', qty: 1 }] },
        headers: { 'idempotency-key': randomUUID() },
      });
      assert.equal(created.status, 201);
      assert.equal(await count(), before + 1);

      const id = created.json<{ id: string }>().id;
      const NODE = 'query($id: ID!) { node(id: $id) { ... on Order { state } } }';
      const state = async () =>
        ((await server.gql(NODE, { id }, { token: alice })).body.data as { node: { state: string } }).node.state;
      assert.equal(await state(), 'PENDING');
      const nodeHits = await server.counter('result_cache_hits_total');
      assert.equal(await state(), 'PENDING');
      assert.equal(await server.counter('result_cache_hits_total'), nodeHits + 1);
      const cancelled = await rest(server.url, 'PATCH', `/orders/${id}`, {
        token: alice,
        body: { status: 'cancelled' },
        headers: { 'if-match': created.headers.get('etag')! },
      });
      assert.equal(cancelled.status, 200);
      assert.equal(await state(), 'CANCELLED');
    });
  });
});
