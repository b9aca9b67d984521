import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Fifty fixed requests to /graphql (good, bad, persisted, GET, errors, partial data) and the exact status, headers and
 * body of each answer, as main answered them before issue 36 rebuilt the request path
 * (fixtures/graphql-answers.json). `RECORD_GRAPHQL_ANSWERS=1 npm test -- graphql-answers-unchanged` records them
 * again. What differs from run to run by nature is replaced before comparing: ids and instants (the seed is made at
 * the run's start), request ids, dates, ETags, cache ages, and the points and seconds left in the rate budget (shared by the three servers only with Redis).
 */
const FIXTURE = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'graphql-answers.json');
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

type Target = 'dev' | 'prod' | 'cached';
interface Call {
  name: string;
  target: Target;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | object;
  user?: 'alice' | 'carol';
}

const TRUSTED = '{ products { sku name } }';
const APQ = 'query Apq { products { sku } }';
const ORDERS = 'query Recent($n: Int) { recentOrders(first: $n) { id status customer { name } items { qty } } }';
const json = { 'content-type': 'application/json' };
const gr = { 'content-type': 'application/json', accept: 'application/graphql-response+json' };
const aj = { 'content-type': 'application/json', accept: 'application/json' };
const q = (query: string, more: Record<string, string> = {}) =>
  `/graphql?${new URLSearchParams({ query, ...more }).toString()}`;
const deep = `{ recentOrders { customer { orders { customer { orders { customer { orders { customer { orders { customer { orders { id } } } } } } } } } } } }`;
const aliases = `{ ${Array.from({ length: 120 }, (_, i) => `a${i}: __typename`).join(' ')} }`;

const CALLS: Call[] = [
  {
    name: 'products, POST, no accept',
    target: 'dev',
    headers: json,
    body: { query: '{ products { sku name priceCents } }' },
  },
  { name: 'products, POST, application/json', target: 'dev', headers: aj, body: { query: '{ products { sku } }' } },
  {
    name: 'products, POST, graphql-response+json',
    target: 'dev',
    headers: gr,
    body: { query: '{ products { sku } }' },
  },
  {
    name: 'products, GET',
    target: 'dev',
    method: 'GET',
    path: q('{ products { sku name } }'),
    headers: { accept: 'application/json' },
  },
  {
    name: 'product by variable, GET',
    target: 'dev',
    method: 'GET',
    path: q('query P($s: String!) { product(sku: $s) { sku name } }', { variables: '{"s":"KB-001"}' }),
  },
  {
    name: 'orders, signed in',
    target: 'dev',
    headers: aj,
    body: { query: ORDERS, variables: { n: 3 } },
    user: 'alice',
  },
  {
    name: 'orders, staff',
    target: 'dev',
    headers: gr,
    body: { query: ORDERS, variables: { n: 2 }, operationName: 'Recent' },
    user: 'carol',
  },
  {
    name: 'orders, anonymous (partial data)',
    target: 'dev',
    headers: aj,
    body: { query: '{ products { sku } recentOrders(first: 1) { id } }' },
  },
  {
    name: 'orders, anonymous, graphql-response+json',
    target: 'dev',
    headers: gr,
    body: { query: '{ recentOrders(first: 1) { id } }' },
  },
  {
    name: 'order that does not exist',
    target: 'dev',
    headers: aj,
    body: { query: '{ order(id: "ord_nope") { id } }' },
    user: 'alice',
  },
  { name: 'viewer, anonymous', target: 'dev', headers: aj, body: { query: '{ viewer { __typename } }' } },
  { name: '__typename', target: 'dev', headers: aj, body: { query: '{ __typename }' } },
  {
    name: '__type in development',
    target: 'dev',
    headers: aj,
    body: { query: '{ __type(name: "Product") { name } }' },
  },
  { name: 'syntax error, application/json', target: 'dev', headers: aj, body: { query: '{ products { sku }' } },
  { name: 'syntax error, graphql-response+json', target: 'dev', headers: gr, body: { query: '{ products { sku }' } },
  { name: 'validation error, application/json', target: 'dev', headers: aj, body: { query: '{ products { skuu } }' } },
  {
    name: 'validation error, graphql-response+json',
    target: 'dev',
    headers: gr,
    body: { query: '{ products { skuu } }' },
  },
  { name: 'malformed JSON body', target: 'dev', headers: aj, body: '{"query": ' },
  { name: 'malformed JSON body, graphql-response+json', target: 'dev', headers: gr, body: '{"query": ' },
  { name: 'no query', target: 'dev', headers: aj, body: { variables: {} } },
  { name: 'query is a number', target: 'dev', headers: gr, body: { query: 42 } },
  { name: 'variables not an object', target: 'dev', headers: aj, body: { query: '{ __typename }', variables: '[1]' } },
  {
    name: 'variable of the wrong type',
    target: 'dev',
    headers: aj,
    body: { query: ORDERS, variables: { n: 'three' } },
    user: 'alice',
  },
  {
    name: 'unknown operationName',
    target: 'dev',
    headers: aj,
    body: { query: ORDERS, operationName: 'Nope' },
    user: 'alice',
  },
  {
    name: 'two operations, no name',
    target: 'dev',
    headers: gr,
    body: { query: 'query A { __typename } query B { __typename }' },
  },
  { name: 'batch (array body)', target: 'dev', headers: aj, body: [{ query: '{ __typename }' }] },
  { name: 'PUT', target: 'dev', method: 'PUT', headers: aj },
  {
    name: 'mutation over GET',
    target: 'dev',
    method: 'GET',
    path: q('mutation { cancelOrder(id: "x") { id } }'),
    headers: { accept: 'application/json' },
  },
  {
    name: 'text/plain body',
    target: 'dev',
    headers: { 'content-type': 'text/plain' },
    body: '{"query":"{ __typename }"}',
  },
  {
    name: 'unacceptable accept',
    target: 'dev',
    headers: { 'content-type': 'application/json', accept: 'text/html' },
    body: { query: '{ __typename }' },
  },
  { name: 'depth over the limit', target: 'dev', headers: aj, body: { query: deep }, user: 'alice' },
  { name: 'aliases over the limit', target: 'dev', headers: gr, body: { query: aliases } },
  {
    name: 'cost over the limit',
    target: 'dev',
    headers: aj,
    body: {
      query:
        '{ a: recentOrders(first: 100) { items { product { name } } } b: recentOrders(first: 100) { items { product { name } } } c: recentOrders(first: 100) { items { product { name } } } }',
    },
    user: 'alice',
  },
  {
    name: 'bad bearer token',
    target: 'dev',
    headers: { ...aj, authorization: 'Bearer nope' },
    body: { query: '{ __typename }' },
  },
  {
    name: 'cookie from a foreign origin',
    target: 'dev',
    headers: { ...aj, origin: 'https://evil.example', cookie: 'sid=x' },
    body: { query: '{ __typename }' },
  },
  {
    name: 'mutation with a bad id',
    target: 'dev',
    headers: aj,
    body: { query: 'mutation { cancelOrder(id: "ord_nope") { id } }' },
    user: 'alice',
  },
  {
    name: 'APQ hash unknown',
    target: 'dev',
    headers: aj,
    body: { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(APQ) } } },
  },
  {
    name: 'APQ register',
    target: 'dev',
    headers: aj,
    body: { query: APQ, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(APQ) } } },
  },
  {
    name: 'APQ by hash, POST',
    target: 'dev',
    headers: aj,
    body: { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(APQ) } } },
  },
  {
    name: 'APQ by hash, GET',
    target: 'dev',
    method: 'GET',
    path: `/graphql?extensions=${encodeURIComponent(JSON.stringify({ persistedQuery: { version: 1, sha256Hash: sha256(APQ) } }))}`,
    headers: { accept: 'application/json' },
  },
  {
    name: 'APQ hash mismatch',
    target: 'dev',
    headers: gr,
    body: { query: '{ __typename }', extensions: { persistedQuery: { version: 1, sha256Hash: sha256(APQ) } } },
  },
  {
    name: 'documentId of a registered query',
    target: 'dev',
    headers: aj,
    body: { documentId: `sha256:${sha256(APQ)}` },
  },
  {
    name: 'trusted document by documentId',
    target: 'prod',
    headers: aj,
    body: { documentId: `sha256:${sha256(TRUSTED)}` },
  },
  {
    name: 'trusted document by hash, GET',
    target: 'prod',
    method: 'GET',
    path: `/graphql?extensions=${encodeURIComponent(JSON.stringify({ persistedQuery: { version: 1, sha256Hash: sha256(TRUSTED) } }))}`,
    headers: { accept: 'application/json' },
  },
  { name: 'untrusted text in production', target: 'prod', headers: aj, body: { query: '{ products { sku } }' } },
  {
    name: 'unknown document in production',
    target: 'prod',
    headers: gr,
    body: { documentId: `sha256:${sha256('{ x }')}` },
  },
  {
    name: 'text GET in production',
    target: 'prod',
    method: 'GET',
    path: q(TRUSTED),
    headers: { accept: 'application/json' },
  },
  { name: 'result cache, first', target: 'cached', headers: aj, body: { query: '{ products { sku name } }' } },
  { name: 'result cache, again', target: 'cached', headers: aj, body: { query: '{ products { sku name } }' } },
  {
    name: 'result cache, GET, signed in',
    target: 'cached',
    method: 'GET',
    path: q(ORDERS, { variables: '{"n":2}' }),
    headers: { accept: 'application/json' },
    user: 'alice',
  },
];

/** Headers that name the moment or the request rather than the answer. */
const VOLATILE = new Set(['date', 'x-request-id', 'traceparent', 'keep-alive', 'connection']);

function normalise(text: string): string {
  return (
    text
      .replace(/\b(ord|cus|prd|whe|evt|usr)_[0-9a-z]{20,32}\b/g, '$1_<id>')
      .replace(/localhost:\d+/g, 'localhost:<port>')
      // Seconds to the budget window's end: a loaded machine can take more than one between the first request and the last.
      .replace(/"resetSeconds":\d+/g, '"resetSeconds":<s>')
      // What the budget has left: with Redis the three servers share one budget (as replicas do), embedded each its own.
      .replace(/"remaining":\d+/g, '"remaining":<n>')
      .replace(/;r=\d+/g, ';r=<n>')
      .replace(/;t=\d+/g, ';t=<s>')
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<instant>')
  );
}

interface Answer {
  name: string;
  status: number;
  headers: [string, string][];
  body: string;
}

describe('GraphQL answers are byte-identical to the recorded ones (issue 36)', () => {
  const servers = {} as Record<Target, TestServer>;
  const tokens: Record<string, string> = {};
  const answers: Answer[] = [];
  beforeAll(async () => {
    servers.dev = await startTestServer({}, { replicated: true });
    const manifest = join(mkdtempSync(join(tmpdir(), 'orders-manifest-')), 'persisted-documents.json');
    writeFileSync(manifest, JSON.stringify({ [sha256(TRUSTED)]: TRUSTED }));
    servers.prod = await startTestServer(
      { NODE_ENV: 'production', OIDC_ISSUER: servers.dev.running.app.issuer, PERSISTED_DOCUMENTS: manifest },
      { sameDatabaseAs: servers.dev },
    );
    servers.cached = await startTestServer({ RESULT_CACHE: 'on' }, { sameDatabaseAs: servers.dev });
    tokens.alice = await servers.dev.token('alice');
    tokens.carol = await servers.dev.token('carol');
    tokens.cachedAlice = await servers.cached.token('alice');
  });
  afterAll(async () => {
    await servers.cached.close();
    await servers.prod.close();
    await servers.dev.close();
  });

  test('the fixed set holds fifty requests', () => {
    assert.equal(CALLS.length, 50);
  });

  test('each answer has the recorded status, headers and body', async () => {
    for (const call of CALLS) {
      const headers: Record<string, string> = { ...call.headers };
      if (call.user) headers.authorization = `Bearer ${tokens[call.target === 'cached' ? 'cachedAlice' : call.user]}`;
      const body =
        call.body === undefined ? undefined : typeof call.body === 'string' ? call.body : JSON.stringify(call.body);
      const res = await fetch(`${servers[call.target].url}${call.path ?? '/graphql'}`, {
        method: call.method ?? 'POST',
        headers,
        ...(body !== undefined ? { body } : {}),
        redirect: 'manual',
      });
      const text = await res.text();
      const kept: [string, string][] = [];
      res.headers.forEach((value, key) => {
        if (VOLATILE.has(key)) return;
        if (key === 'etag') kept.push([key, '<etag>']);
        else if (key === 'age') kept.push([key, '<age>']);
        else kept.push([key, normalise(value)]);
      });
      kept.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      answers.push({ name: call.name, status: res.status, headers: kept, body: normalise(text) });
    }
    if (process.env.RECORD_GRAPHQL_ANSWERS) {
      writeFileSync(FIXTURE, `${JSON.stringify(answers, null, 2)}\n`);
      return;
    }
    const recorded = JSON.parse(readFileSync(FIXTURE, 'utf8')) as Answer[];
    assert.equal(recorded.length, answers.length);
    for (let i = 0; i < answers.length; i++)
      assert.deepEqual(answers[i], recorded[i], `request ${i + 1}: ${answers[i]!.name}`);
  });
});
