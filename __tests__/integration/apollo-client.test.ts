import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';
import type { NormalizedCacheObject } from '@apollo/client';
import { createPersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { documentationFiles } from '../../scripts/readme/files.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

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
  const fromBodies = [...readme.matchAll(/"query":"((?:[^"\\]|\\.)*)"/g)].map((m) => JSON.parse(`"${m[1]}"`) as string);
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
    server = await startTestServer();
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
  afterAll(async () => {
    await production.close();
    await server.close();
  });

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
        { method: 'POST', hashed: true, fullText: false, status: 200, cacheControl: 'max-age=300, public', code: null },
        // Known hash: a plain GET with no query text, which an HTTP cache or CDN may store for five minutes.
        { method: 'GET', hashed: true, fullText: false, status: 200, cacheControl: 'max-age=300, public', code: null },
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
      exchanges.map((e) => [e.method, e.url.searchParams.get('query')?.replace(/\s+/g, ' '), e.contentType, e.status]),
      [['GET', 'query Skus { products { id sku __typename } }', 'application/json', 200]],
    );
  });
});
