// The GraphQL rate budget and APQ bounds, the GraphQL Cop probes and production's GraphQL, in one Jest file: a file
// loads its modules into a fresh context and costs about 1.5 s of CPU before its first test (docs/testing.md#how-long-
// it-takes). Each top-level describe block below was a test file of its own, named after it (the comment above it gives
// the old file name), with its tests unchanged, starting the servers it starts; graphql-cop-probes and
// graphql-production share their development and production pair.
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { getIntrospectionQuery } from 'graphql';
import request, { type Response as SuperResponse } from 'supertest';
import { authCookies } from '../../src/http/middleware/index.js';
import { aliases, chainedFragments, createOrders, FAN_OUT } from '../helpers/hostile.js';
import { http, textOf } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { subscriber } from '../helpers/subscriber.js';
import { codeOf, send, type Transport, TRANSPORTS } from '../helpers/transports.js';

/**
 * A development server and a production one over its database, for the two blocks below that each started the same
 * pair (each start costs about 0.7 s of CPU; both blocks own their data and read no server-wide state of the pair):
 * production refuses the embedded IdP and database, so it trusts development's IdP and borrows its database, as
 * replicas do. Started on first use, closed by the file's last afterAll, as helpers/sharedServer.ts does.
 */
let pair: Promise<{ dev: TestServer; prod: TestServer }> | undefined;
const developmentAndProduction = () =>
  (pair ??= (async () => {
    const dev = await startTestServer({}, { replicated: true });
    const prod = await startTestServer(
      { NODE_ENV: 'production', OIDC_ISSUER: dev.running.app.issuer },
      { sameDatabaseAs: dev },
    );
    return { dev, prod };
  })());
afterAll(async () => {
  if (!pair) return;
  const { dev, prod } = await pair;
  await prod.close();
  await dev.close();
});

// ─── was __tests__/integration/graphql-budget.test.ts ───
describe('graphql-budget', () => {
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
  const POINTS = 5;

  describe('the GraphQL rate budget on every transport', () => {
    let server: TestServer;
    let users: { alice: string; bob: string; carol: string };
    beforeAll(async () => {
      server = await startTestServer({ RATE_LIMIT_POINTS: String(POINTS), RATE_LIMIT_WINDOW_S: '600' });
      users = await server.users();
    });
    afterAll(() => server.close());

    test('HTTP answers carry RateLimit-Policy and RateLimit, and 429 with Retry-After once the budget is spent', async () => {
      const auth = { authorization: `Bearer ${users.alice}` };
      for (let i = 1; i <= POINTS; i++) {
        const res = await request(server.url)
          .post('/graphql')
          .set(auth)
          .send({ query: '{ viewer { subject } }' })
          .expect(200);
        assert.equal(res.headers['ratelimit-policy'], `"orders";q=${POINTS};w=600`);
        assert.match(res.headers.ratelimit!, new RegExp(`^"orders";r=${POINTS - i};t=\\d+$`));
        assert.deepEqual(Object.keys(res.body.extensions.cost).sort(), [
          'complexity',
          'remaining',
          'requested',
          'resetSeconds',
        ]);
        assert.equal(res.body.extensions.cost.remaining, POINTS - i);
      }
      const refused = await request(server.url)
        .post('/graphql')
        .set(auth)
        .send({ query: '{ viewer { subject } }' })
        .expect(429);
      assert.equal(refused.body.errors[0].extensions.code, 'RATE_LIMITED');
      assert.ok(Number(refused.headers['retry-after']) > 0);
      assert.equal(refused.body.data, undefined);
    });

    test('each transport refuses with RATE_LIMITED once its caller has spent the budget', async () => {
      const callers = { post: users.bob, get: users.carol, ws: undefined, sse: undefined } as const;
      for (const transport of ['post', 'get', 'ws'] as const) {
        const token = callers[transport];
        for (let i = 0; i < POINTS; i++) {
          const ok = await send(server.url, transport, { query: '{ __typename }' }, token);
          assert.equal(ok.body.errors, undefined, `${transport} #${i}`);
        }
        const res = await send(server.url, transport, { query: '{ __typename }' }, token);
        assert.equal(codeOf(res), 'RATE_LIMITED', transport);
        if (transport !== 'ws') assert.equal(res.status, 429);
      }
      // Anonymous callers share their address's budget: the WebSocket caller above spent it for SSE too.
      const res = await send(server.url, 'sse', { query: '{ __typename }' });
      assert.equal(codeOf(res), 'RATE_LIMITED');
    });
  });

  describe('persisted queries (APQ) on every transport', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer({ APQ_MAX_BYTES: '300', APQ_MAX_ENTRIES: '2' });
    });
    afterAll(() => server.close());

    test('a response that shared caches may store carries no RateLimit fields', async () => {
      const res = await request(server.url).get('/graphql').query({ query: '{ products { sku } }' }).expect(200);
      assert.match(res.headers['cache-control']!, /public/);
      assert.equal(res.headers.ratelimit, undefined);
      assert.equal(res.headers['ratelimit-policy'], undefined);
    });

    for (const transport of TRANSPORTS) {
      test(`${transport}: a hash that does not match the text is PERSISTED_QUERY_HASH_MISMATCH`, async () => {
        const res = await send(server.url, transport, {
          query: '{ products { sku } }',
          extensions: { persistedQuery: { version: 1, sha256Hash: sha256('{ products { name } }') } },
        });
        assert.equal(codeOf(res), 'PERSISTED_QUERY_HASH_MISMATCH');
      });

      test(`${transport}: an unknown hash is PERSISTED_QUERY_NOT_FOUND`, async () => {
        const res = await send(server.url, transport, {
          query: '',
          extensions: { persistedQuery: { version: 1, sha256Hash: sha256(randomUUID()) } },
        });
        assert.equal(codeOf(res), 'PERSISTED_QUERY_NOT_FOUND');
      });
    }

    const register = async (query: string) => {
      const extensions = { persistedQuery: { version: 1, sha256Hash: sha256(query) } };
      const res = await request(server.url).post('/graphql').send({ query, extensions }).expect(200);
      assert.equal(res.body.errors, undefined);
      return extensions;
    };

    test('a registered document is found by hash on every transport', async () => {
      const extensions = await register(`{ products { sku } a: __typename }`);
      for (const transport of TRANSPORTS) {
        const res = await send(server.url, transport, { query: '', extensions });
        assert.equal(res.body.errors, undefined, transport);
        assert.ok((res.body.data!.products as unknown[]).length > 0);
      }
    });

    test('a document larger than APQ_MAX_BYTES runs but is not registered', async () => {
      const query = `{ products { sku } ${' '.repeat(300)} }`;
      const extensions = await register(query);
      const lookup = await send(server.url, 'post', { extensions });
      assert.equal(codeOf(lookup), 'PERSISTED_QUERY_NOT_FOUND');
    });

    test('at most APQ_MAX_ENTRIES documents are kept: the oldest goes first', async () => {
      const [first] = [await register(`{ products { sku } b: __typename }`)];
      await register(`{ products { sku } c: __typename }`);
      await register(`{ products { sku } d: __typename }`);
      // Apollo does not wait for its cache.set before answering, so with Redis the eviction the third registration
      // causes can land just after that response: each look again is a full round trip behind it (bounded, no sleep).
      let lookup = await send(server.url, 'post', { extensions: first });
      for (let again = 0; again < 20 && codeOf(lookup) !== 'PERSISTED_QUERY_NOT_FOUND'; again++) {
        lookup = await send(server.url, 'post', { extensions: first });
      }
      assert.equal(codeOf(lookup), 'PERSISTED_QUERY_NOT_FOUND');
    });
  });

  describe('a subscription spends the rate budget once, when it subscribes', () => {
    const BUDGET = 3;
    let server: TestServer;
    let users: { alice: string; bob: string; carol: string };
    beforeAll(async () => {
      server = await startTestServer({ RATE_LIMIT_POINTS: String(BUDGET), RATE_LIMIT_WINDOW_S: '600' });
      users = await server.users();
    });
    afterAll(() => server.close());

    test('a staff subscriber receives more events than its budget holds points, and its budget is unchanged', async () => {
      const listening = server.nextSubscription();
      const carol = subscriber(server.url, users.carol);
      const sub = carol.subscribe('subscription { orderCreated { id } }');
      await listening;
      // Other users' writes, each charged to its writer (one point each): twice the subscriber's budget in events.
      const placed: string[] = [];
      for (const writer of [users.alice, users.bob]) {
        for (let i = 0; i < BUDGET; i++) {
          const res = await server.gql(
            'mutation { createOrder(input: { items: [{ sku: "KB-001", qty: 1 }] }) { id } }',
            {},
            { token: writer },
          );
          assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
          placed.push((res.body.data as { createOrder: { id: string } }).createOrder.id);
        }
      }
      await sub.next(2 * BUDGET);
      assert.deepEqual(
        sub.received.map((r) => (r.data as { orderCreated: { id: string } }).orderCreated.id),
        placed,
      );
      assert.ok(sub.received.every((r) => r.errors === undefined));
      // One point for the subscribe, one for this query: the events cost carol nothing.
      const res = await server.gql('{ viewer { subject } }', {}, { token: users.carol });
      assert.equal(res.body.errors, undefined);
      assert.equal(
        (res.body as { extensions?: { cost: { remaining: number } } }).extensions?.cost.remaining,
        BUDGET - 2,
      );
      await carol.dispose();
    });
  });

  describe('anonymous HTTP GraphQL callers each spend their own address’s budget', () => {
    let server: TestServer;
    beforeAll(async () => {
      // One proxy hop trusted, so X-Forwarded-For names the client, as behind the compose nginx.
      server = await startTestServer({ RATE_LIMIT_POINTS: '1', RATE_LIMIT_WINDOW_S: '600', TRUST_PROXY: '1' });
    });
    afterAll(() => server.close());

    // Apollo runs each operation with a copy of the context it is given: the address must travel with the copy.
    test('one address spending its budget leaves another’s untouched', async () => {
      const ask = (address: string) =>
        request(server.url).get('/graphql?query={products{sku}}').set('x-forwarded-for', address);
      assert.equal((await ask('203.0.113.7')).status, 200);
      const refused = await ask('203.0.113.7');
      assert.equal(refused.status, 429);
      assert.equal(refused.body.errors[0].extensions.code, 'RATE_LIMITED');
      const other = await ask('198.51.100.9');
      assert.equal(other.status, 200);
      assert.equal(other.body.extensions.cost.remaining, 0);
    });
  });

  describe('anonymous GraphQL callers over HTTP', () => {
    let server: TestServer;
    beforeAll(async () => {
      // One proxy hop is trusted, so the test can speak from different client addresses.
      server = await startTestServer({ RATE_LIMIT_POINTS: '3', RATE_LIMIT_WINDOW_S: '600', TRUST_PROXY: '1' });
    });
    afterAll(() => server.close());

    test('are keyed by their address: one address spending its budget leaves the others theirs', async () => {
      const send = (ip: string) =>
        request(server.url).post('/graphql').set('x-forwarded-for', ip).send({ query: '{ __typename }' });
      for (let left = 2; left >= 0; left--) {
        const res = await send('203.0.113.7').expect(200);
        assert.equal(res.headers.ratelimit, `"orders";r=${left};t=600`);
        assert.equal(res.body.extensions.cost.remaining, left);
      }
      const refused = await send('203.0.113.7').expect(429);
      assert.equal(refused.body.errors[0].extensions.code, 'RATE_LIMITED');
      const elsewhere = await send('203.0.113.8').expect(200);
      assert.deepEqual(elsewhere.body.data, { __typename: 'Query' });
      assert.equal(elsewhere.headers.ratelimit, `"orders";r=2;t=600`);
    });
  });
});

// ─── was __tests__/integration/graphql-cop-probes.test.ts ───
describe('graphql-cop-probes', () => {
  /**
   * graphql-cop 1.15 (dolevf/graphql-cop, lib/tests/*.py), each probe sent as the tool sends it — its headers, its JSON
   * as Python's json.dumps writes it, its form and query-string encoding — and answered as each mode should answer.
   * The tool reports a probe when the answer matches its verdict in `reports` below; none of its findings may fire in
   * production. `docs/testing.md` says how to run the tool itself.
   */

  /** lib/utils.py sends these with every request (config.py's User-Agent, and what python-requests adds). */
  const TOOL_HEADERS = {
    'user-agent': 'graphql-cop/1.15',
    'accept-encoding': 'gzip, deflate',
    accept: '*/*',
    connection: 'keep-alive',
  };

  interface Answer {
    status: number;
    headers: Record<string, string>;
    text: string;
    json: () => {
      data?: Record<string, unknown> | null;
      errors?: { message: string; extensions?: Record<string, unknown> }[];
      extensions?: Record<string, unknown>;
    };
  }

  const answer = (res: SuperResponse): Answer => {
    const text = textOf(res);
    return { status: res.status, headers: res.headers as Record<string, string>, text, json: () => JSON.parse(text) };
  };

  /** graph_query(): a POST of `{"query": …, "operationName": "cop"}`, or of ten `{"query": …}` when batching. */
  async function graphQuery(base: string, payload: string, batch = false): Promise<Answer> {
    const one = (withName: boolean) =>
      `{"query": ${JSON.stringify(payload)}${withName ? ', "operationName": "cop"' : ''}}`;
    const body = batch ? `[${Array.from({ length: 10 }, () => one(false)).join(', ')}]` : one(true);
    const res = await http(base)
      .post('/graphql')
      .set({ ...TOOL_HEADERS, 'content-type': 'application/json' })
      .send(body);
    return answer(res);
  }

  /** request(): a GET with `params` in the query string, or a POST of `data` form-encoded, as python-requests does. */
  async function toolRequest(
    base: string,
    opts: { params?: Record<string, string>; data?: Record<string, string>; headers?: Record<string, string> } = {},
  ): Promise<Answer> {
    const query = opts.params ? `?${new URLSearchParams(opts.params).toString()}` : '';
    const headers = { ...TOOL_HEADERS, ...opts.headers };
    const res = opts.data
      ? await http(base)
          .post('/graphql')
          .set({ ...headers, 'content-type': 'application/x-www-form-urlencoded' })
          .send(new URLSearchParams(opts.data).toString())
      : await http(base).get(`/graphql${query}`).set(headers);
    return answer(res);
  }

  /** The tool's own verdicts (each probe's `res['result'] = True` condition), so a test says what the tool would. */
  const reports = {
    aliasOverloading: (a: Answer) => Boolean(a.json().data?.alias100),
    batching: (a: Answer) => (JSON.parse(a.text) as unknown[]).length >= 10,
    circularIntrospection: (a: Answer) =>
      ((a.json().data?.__schema as { types?: unknown[] } | undefined)?.types?.length ?? 0) > 25,
    directiveOverloading: (a: Answer) => a.json().errors?.length === 10,
    fieldSuggestions: (a: Answer) => Boolean(a.json().errors?.[0]?.message.includes('Did you mean')),
    getBasedMutation: (a: Answer) => Boolean(a.json().data?.__typename),
    getMethodSupport: (a: Answer) => Boolean(a.json().data?.__typename),
    graphiql: (a: Answer) =>
      ['graphiql.min.css', 'GraphQL Playground', 'GraphiQL', 'graphql-playground'].some((w) => a.text.includes(w)),
    introspection: (a: Answer) => Boolean((a.json().data?.__schema as { types?: unknown[] } | undefined)?.types),
    postBasedCsrf: (a: Answer) => Boolean(a.json().data?.__typename),
    traceMode: (a: Answer) => JSON.stringify(a.json()).toLowerCase().includes('"tracing"'),
    unhandledError: (a: Answer) => Boolean(a.json().errors?.[0]?.extensions?.exception),
  };

  /** What production answers a GET whose query text could come from another site's page. */
  const FORGERY =
    'This GET sends a query text and could be a cross-site request forgery. Send an Apollo-Require-Preflight: true or ' +
    'X-Apollo-Operation-Name header (or Content-Type: application/json), name a persisted document ' +
    '(extensions.persistedQuery.sha256Hash or documentId) instead of its text, or use POST.';
  const PREFLIGHTED = { 'apollo-require-preflight': 'true' };

  const DIRECTIVES = 'query cop { __typename @aa@aa@aa@aa@aa@aa@aa@aa@aa@aa }';
  const ONE_DIRECTIVE_ERROR =
    'The document uses 10 unknown or repeated directives (@aa); at most 3 are reported one by one.';

  describe('graphql-cop probes, in development and in production', () => {
    let development: TestServer;
    let production: TestServer;
    beforeAll(async () => {
      ({ dev: development, prod: production } = await developmentAndProduction());
    });
    const modes = () =>
      [
        ['development', development.url],
        ['production', production.url],
      ] as const;

    test('alias overloading: 101 aliases are refused before anything runs, in both modes', async () => {
      const aliases = Array.from({ length: 101 }, (_, i) => `alias${i}:__typename \n`).join('');
      for (const [mode, url] of modes()) {
        const res = await graphQuery(url, `query cop { ${aliases} }`);
        assert.equal(res.status, 200, mode);
        assert.deepEqual(res.json(), {
          errors: [
            {
              message: 'The operation uses 101 aliases; at most 15 are allowed.',
              locations: [{ line: 1, column: 1 }],
              extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
            },
          ],
        });
        assert.equal(reports.aliasOverloading(res), false);
      }
    });

    test('batching: an array of ten operations is one 400, in both modes', async () => {
      for (const [mode, url] of modes()) {
        const res = await graphQuery(url, 'query cop { __typename }', true);
        assert.equal(res.status, 400, mode);
        assert.deepEqual(res.json(), {
          errors: [
            {
              message: 'Batched requests are not supported; send one operation per request.',
              extensions: { code: 'BAD_REQUEST' },
            },
          ],
        });
        assert.equal(reports.batching(res), false);
      }
    });

    test('circular introspection: five nested lists are refused by the introspection bound, in both modes', async () => {
      const query =
        'query cop { __schema { types { fields { type { fields { type { fields { type { fields { type { name } } } } } } } } } } }';
      for (const [mode, url] of modes()) {
        const res = await graphQuery(url, query);
        assert.equal(res.status, 200, mode);
        assert.equal(res.json().data, undefined);
        assert.deepEqual(
          res.json().errors?.map((e) => [e.message, e.extensions?.code]),
          [['Introspection may nest at most 20 levels and 3 lists.', 'GRAPHQL_VALIDATION_FAILED']],
        );
        assert.equal(reports.circularIntrospection(res), false);
      }
    });

    test('directive overloading: ten unknown directives are one error naming the limit, in both modes', async () => {
      for (const [mode, url] of modes()) {
        const res = await graphQuery(url, DIRECTIVES);
        assert.equal(res.status, 200, mode);
        assert.deepEqual(res.json(), {
          errors: [
            {
              message: ONE_DIRECTIVE_ERROR,
              locations: [{ line: 1, column: 24 }],
              extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
            },
          ],
        });
        assert.equal(reports.directiveOverloading(res), false);
      }
    });

    test('directive overloading: the same one error on every transport (POST, GET, WebSocket, SSE)', async () => {
      for (const [mode, url] of modes()) {
        for (const transport of TRANSPORTS) {
          const res = await send(url, transport, { query: DIRECTIVES, operationName: 'cop' });
          assert.equal(res.body.errors?.length, 1, `${mode} ${transport}: ${JSON.stringify(res.body)}`);
          assert.equal(res.body.errors![0]!.message, ONE_DIRECTIVE_ERROR);
          assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
          assert.equal(res.body.data, undefined);
        }
      }
    });

    test('directive overloading at its edge: 3 mistakes are each named, 4 are one error; repeats of @include count', async () => {
      const url = production.url;
      const three = await graphQuery(url, 'query cop { __typename @aa @bb @aa }');
      assert.deepEqual(
        three.json().errors?.map((e) => e.message),
        ['Unknown directive "@aa".', 'Unknown directive "@bb".', 'Unknown directive "@aa".'],
      );
      const four = await graphQuery(url, 'query cop { __typename @aa @bb @aa @cc }');
      assert.deepEqual(
        four.json().errors?.map((e) => e.message),
        ['The document uses 4 unknown or repeated directives (@aa, @bb, @cc); at most 3 are reported one by one.'],
      );
      // A known directive that may appear once per location, used five times: four repeats.
      const repeated = await graphQuery(url, `query cop { __typename ${'@include(if: true) '.repeat(5)}}`);
      assert.deepEqual(
        repeated.json().errors?.map((e) => e.message),
        ['The document uses 4 unknown or repeated directives (@include); at most 3 are reported one by one.'],
      );
      // Spread over fields, fragments and the operation, they still add up; the names listed stop at three.
      const spread = await graphQuery(
        url,
        'query cop @a { __typename @b ...F } fragment F on Query @c { __typename @d }',
      );
      assert.deepEqual(
        spread.json().errors?.map((e) => e.message),
        ['The document uses 4 unknown or repeated directives (@a, @b, @c, …); at most 3 are reported one by one.'],
      );
      // Legal directives, however many within MAX_DIRECTIVES, are not mistakes.
      const legal = await graphQuery(
        url,
        'query cop { a: __typename @include(if: true) @skip(if: false) b: __typename @skip(if: false) }',
      );
      assert.deepEqual(legal.json().data, { a: 'Query', b: 'Query' });
    });

    test('directive overloading under 24 concurrent callers: each gets its one error', async () => {
      const answers = await Promise.all(
        Array.from({ length: 24 }, (_, i) => graphQuery(i % 2 ? development.url : production.url, DIRECTIVES)),
      );
      for (const res of answers) {
        assert.equal(res.status, 200);
        assert.deepEqual(
          res.json().errors?.map((e) => e.message),
          [ONE_DIRECTIVE_ERROR],
        );
      }
    });

    test('field suggestions: development suggests "directives"; production names the mistake without a suggestion', async () => {
      const query = 'query cop { __schema { directive } }';
      const dev = await graphQuery(development.url, query);
      assert.deepEqual(
        dev.json().errors?.map((e) => e.message),
        ['Cannot query field "directive" on type "__Schema". Did you mean "directives"?'],
      );
      assert.equal(reports.fieldSuggestions(dev), true, 'development is meant to suggest');
      const prod = await graphQuery(production.url, query);
      assert.equal(prod.status, 200);
      assert.deepEqual(
        prod.json().errors?.map((e) => [e.message, e.extensions?.code]),
        [
          [
            'GraphQL introspection has been disabled, but the requested query contained the field "__schema".',
            'GRAPHQL_VALIDATION_FAILED',
          ],
          ['Cannot query field "directive" on type "__Schema".', 'GRAPHQL_VALIDATION_FAILED'],
        ],
      );
      assert.equal(reports.fieldSuggestions(prod), false);
    });

    test('GET-based mutation: never runs; 405 in development, refused as a possible forgery in production', async () => {
      const params = { query: 'mutation cop {__typename}' };
      const dev = await toolRequest(development.url, { params });
      const prod = await toolRequest(production.url, { params });
      // Production first asks a GET with a query text to show it is not cross-site; shown so, it is told to POST.
      const shown = await toolRequest(production.url, { params, headers: PREFLIGHTED });
      for (const res of [dev, shown]) {
        assert.equal(res.status, 405);
        assert.equal(res.headers.allow, 'POST');
        assert.deepEqual(res.json(), {
          errors: [
            {
              message: 'GET requests only support query operations, not mutation operations',
              extensions: { code: 'BAD_REQUEST' },
            },
          ],
        });
      }
      assert.equal(prod.status, 400);
      assert.deepEqual(prod.json(), { errors: [{ message: FORGERY, extensions: { code: 'BAD_REQUEST' } }] });
      for (const res of [dev, prod, shown]) assert.equal(reports.getBasedMutation(res), false);
    });

    test('GET method support: development runs a plain GET; production refuses it, and with the session cookie both do', async () => {
      const params = { query: 'query cop {__typename}' };
      const dev = await toolRequest(development.url, { params });
      assert.equal(dev.status, 200);
      assert.deepEqual(dev.json().data, { __typename: 'Query' });
      assert.equal(reports.getMethodSupport(dev), true, "development answers the GraphQL-over-HTTP spec's plain GET");

      // Any page could make a browser send this GET (an <img>, a link): Apollo Server's CSRF prevention refuses it.
      const prod = await toolRequest(production.url, { params });
      assert.equal(prod.status, 400);
      assert.equal(prod.headers['cache-control'], 'no-store');
      assert.match(prod.headers['content-type']!, /^application\/json/);
      assert.deepEqual(prod.json(), { errors: [{ message: FORGERY, extensions: { code: 'BAD_REQUEST' } }] });
      assert.equal(reports.getMethodSupport(prod), false);

      // A link that makes a signed-in browser send its cookie is refused in both modes, by the cookie's own rule.
      const cookie = `${authCookies(production.url).session}=stolen-by-a-cross-site-link`;
      for (const [mode, url] of modes()) {
        const forged = await toolRequest(url, { params, headers: { cookie } });
        assert.equal(forged.status, 400, mode);
        assert.equal(forged.json().data, undefined);
        assert.equal(forged.json().errors?.[0]?.extensions?.code, 'BAD_REQUEST');
        assert.match(forged.json().errors![0]!.message, /carries the session cookie but could be a cross-site/);
      }
    });

    test('GET method support at its edge in production: what a cross-site page cannot send is served', async () => {
      const params = { query: 'query cop {__typename}' };
      const served: [string, Record<string, string>][] = [
        ['Apollo-Require-Preflight', { 'apollo-require-preflight': 'true' }],
        ['X-Apollo-Operation-Name', { 'x-apollo-operation-name': 'cop' }],
        ['Content-Type: application/json', { 'content-type': 'application/json' }],
        ['a JSON Content-Type with parameters', { 'content-type': 'application/json; charset=utf-8' }],
        // Not CORS-safelisted either, so the browser would ask first; and a token is no cookie a forger could borrow.
        ['an Authorization header', { authorization: `Bearer ${await development.token('alice')}` }],
      ];
      const refused: [string, Record<string, string>][] = [
        ['an empty Apollo-Require-Preflight', { 'apollo-require-preflight': '' }],
        ['an empty X-Apollo-Operation-Name', { 'x-apollo-operation-name': '' }],
        ['Content-Type: text/plain', { 'content-type': 'text/plain' }],
        ['a form Content-Type', { 'content-type': 'application/x-www-form-urlencoded' }],
        ['Content-Type: multipart/form-data', { 'content-type': 'multipart/form-data; boundary=x' }],
        ['an unrelated custom header', { 'x-requested-with': 'XMLHttpRequest' }],
      ];
      for (const [what, headers] of served) {
        const res = await toolRequest(production.url, { params, headers });
        assert.equal(res.status, 200, what);
        assert.deepEqual(res.json().data, { __typename: 'Query' }, what);
      }
      for (const [what, headers] of refused) {
        const res = await toolRequest(production.url, { params, headers });
        assert.equal(res.status, 400, what);
        assert.deepEqual(res.json(), { errors: [{ message: FORGERY, extensions: { code: 'BAD_REQUEST' } }] }, what);
      }
      // Each refusal and each answer under 24 concurrent callers.
      const answers = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          toolRequest(production.url, { params, headers: i % 2 ? PREFLIGHTED : {} }).then((res) => [i, res] as const),
        ),
      );
      for (const [i, res] of answers) {
        assert.equal(res.status, i % 2 ? 200 : 400);
        if (i % 2) assert.deepEqual(res.json().data, { __typename: 'Query' });
        else assert.equal(res.json().errors?.[0]?.message, FORGERY);
      }
    });

    test('GET method support: a GET that names a persisted document stays plain in production', async () => {
      // A text of this test's own, registered by POST as Apollo Client's persisted-query link does after a miss.
      const query = `query cop_${randomUUID().replace(/-/g, '')} { __typename }`;
      const sha256Hash = createHash('sha256').update(query).digest('hex');
      const persistedQuery = { version: 1, sha256Hash };
      const unknown = await toolRequest(production.url, { params: { extensions: JSON.stringify({ persistedQuery }) } });
      assert.equal(unknown.json().errors?.[0]?.extensions?.code, 'PERSISTED_QUERY_NOT_FOUND');
      const registered = await http(production.url)
        .post('/graphql')
        .set({ ...TOOL_HEADERS, 'content-type': 'application/json' })
        .send({ query, extensions: { persistedQuery } });
      assert.deepEqual(registered.body.data, { __typename: 'Query' });
      const byName: Record<string, string>[] = [
        { extensions: JSON.stringify({ persistedQuery }) },
        // graphql-codegen's trusted-document id names the same document.
        { documentId: `sha256:${sha256Hash}` },
        // Apollo takes an empty query beside a hash for the hash alone.
        { query: '', extensions: JSON.stringify({ persistedQuery }) },
      ];
      for (const params of byName) {
        const res = await toolRequest(production.url, { params });
        assert.equal(res.status, 200, JSON.stringify(params));
        assert.deepEqual(res.json().data, { __typename: 'Query' });
      }
      // The text beside its hash is a text: it needs the header like any other.
      const withText = await toolRequest(production.url, {
        params: { query, extensions: JSON.stringify({ persistedQuery }) },
      });
      assert.equal(withText.status, 400);
      assert.equal(withText.json().errors?.[0]?.message, FORGERY);
    });

    test('GraphiQL: development serves its IDEs; production has none at /graphql or /graphiql', async () => {
      const sandbox = await toolRequest(development.url, { headers: { accept: 'text/html' } });
      assert.equal(sandbox.status, 200);
      assert.match(sandbox.headers['content-type']!, /^text\/html/);
      assert.equal(reports.graphiql(sandbox), true, 'development is meant to offer its IDE');
      const graphiql = await http(development.url)
        .get('/graphiql')
        .set({ ...TOOL_HEADERS, accept: 'text/html' });
      assert.equal(graphiql.status, 200);
      assert.match(graphiql.text, /GraphiQL/);

      const page = await toolRequest(production.url, { headers: { accept: 'text/html' } });
      assert.equal(page.status, 406);
      assert.deepEqual(page.json(), {
        errors: [
          {
            message: 'Accept application/json or application/graphql-response+json.',
            extensions: { code: 'NOT_ACCEPTABLE' },
          },
        ],
      });
      assert.equal(reports.graphiql(page), false);
      const none = await http(production.url)
        .get('/graphiql')
        .set({ ...TOOL_HEADERS, accept: 'text/html' });
      assert.equal(none.status, 404);
      assert.doesNotMatch(none.text, /GraphiQL/);
    });

    test('introspection: development answers the schema; production refuses it', async () => {
      const query = 'query cop { __schema { types { name fields { name } } } }';
      const dev = await graphQuery(development.url, query);
      assert.equal(reports.introspection(dev), true, 'development is meant to answer introspection');
      const prod = await graphQuery(production.url, query);
      assert.equal(prod.status, 200);
      // One error for the document, however many introspection fields it selects (here __schema, types, fields).
      assert.deepEqual(prod.json(), {
        errors: [
          {
            message: 'GraphQL introspection has been disabled, but the requested query contained the field "__schema".',
            locations: [{ line: 1, column: 13 }],
            extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
          },
        ],
      });
      assert.equal(reports.introspection(prod), false);
    });

    test('POST-based CSRF: a form-encoded POST is 415 and runs nothing, in both modes', async () => {
      for (const [mode, url] of modes()) {
        const res = await toolRequest(url, { data: { query: 'query cop { __typename }' } });
        assert.equal(res.status, 415, mode);
        assert.equal(res.headers['accept-post'], 'application/json');
        assert.deepEqual(res.json(), {
          errors: [
            {
              message: 'POST requests must send Content-Type: application/json.',
              extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' },
            },
          ],
        });
        assert.equal(reports.postBasedCsrf(res), false);
      }
    });

    test('trace mode: no tracing extension, only the cost of the operation, in both modes', async () => {
      for (const [mode, url] of modes()) {
        const res = await graphQuery(url, 'query cop { __typename }');
        assert.equal(res.status, 200, mode);
        const body = res.json();
        assert.deepEqual(body.data, { __typename: 'Query' });
        assert.deepEqual(Object.keys(body.extensions ?? {}), ['cost']);
        assert.equal(reports.traceMode(res), false);
      }
    });

    test('unhandled error: a syntax error is one GRAPHQL_PARSE_FAILED with no exception or stack, in both modes', async () => {
      for (const [mode, url] of modes()) {
        const res = await graphQuery(url, 'qwerty cop { abc }');
        assert.equal(res.status, 200, mode);
        assert.deepEqual(res.json(), {
          errors: [
            {
              message: 'Syntax Error: Unexpected Name "qwerty".',
              locations: [{ line: 1, column: 1 }],
              extensions: { code: 'GRAPHQL_PARSE_FAILED' },
            },
          ],
        });
        assert.equal(reports.unhandledError(res), false);
      }
    });
  });
});

// ─── was __tests__/integration/graphql-production.test.ts ───
describe('graphql-production', () => {
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

  const TRUSTED = '{ products { sku name } }';
  const UNTRUSTED = '{ products { sku } }';
  /** Production's one answer to graphql's own introspection query, which selects 39 introspection fields. */
  const INTROSPECTION_REFUSED =
    'GraphQL introspection has been disabled, but the requested query contained the field "__schema".';

  describe('GraphQL in production, on every transport', () => {
    let dev: TestServer;
    let prod: TestServer;
    let trusted: TestServer;
    let alice: string;
    beforeAll(async () => {
      ({ dev, prod } = await developmentAndProduction());
      const issuer = dev.running.app.issuer;
      const manifest = join(mkdtempSync(join(tmpdir(), 'orders-manifest-')), 'persisted-documents.json');
      writeFileSync(manifest, JSON.stringify({ [sha256(TRUSTED)]: TRUSTED }));
      trusted = await startTestServer(
        { NODE_ENV: 'production', OIDC_ISSUER: issuer, PERSISTED_DOCUMENTS: manifest },
        { sameDatabaseAs: dev },
      );
      alice = await dev.token('alice');
    });
    afterAll(() => trusted.close());

    /** `graphql_document_parses_total` of the trusted-documents server, by who parsed. */
    async function parses(): Promise<Record<string, number>> {
      const res = await request(trusted.running.metricsUrl!).get('/metrics').expect(200);
      const counts: Record<string, number> = {};
      for (const [, by, value] of (res.text as string).matchAll(
        /^graphql_document_parses_total\{by="(\w+)"\} (\d+)$/gm,
      ))
        counts[by!] = Number(value);
      return counts;
    }

    test('the manifest is prepared at start: its document then runs by hash, id or text on every transport unparsed', async () => {
      // Before any request: the one trusted document was parsed and validated once, while the server started.
      assert.deepEqual(await parses(), { prepare: 1, apollo: 0 });
      for (const transport of TRANSPORTS) {
        for (const params of [
          { query: '', extensions: { persistedQuery: { version: 1, sha256Hash: sha256(TRUSTED) } } },
          { documentId: `sha256:${sha256(TRUSTED)}` },
          { query: TRUSTED },
        ]) {
          const res = await send(trusted.url, transport, params);
          assert.equal(res.body.errors, undefined, `${transport} ${JSON.stringify(res.body.errors)}`);
          assert.ok((res.body.data!.products as unknown[]).length > 0);
        }
      }
      // Neither the front door nor Apollo parsed it again.
      assert.deepEqual(await parses(), { prepare: 1, apollo: 0 });
    });

    for (const transport of TRANSPORTS) {
      test(`${transport}: getIntrospectionQuery() is refused with one error`, async () => {
        const res = await send(prod.url, transport, { query: getIntrospectionQuery() });
        assert.deepEqual(
          res.body.errors?.map((e) => [e.message, e.extensions?.code]),
          [[INTROSPECTION_REFUSED, 'GRAPHQL_VALIDATION_FAILED']],
        );
        assert.equal(res.body.data, undefined);
      });

      test(`${transport}: a __type lookup is refused, while __typename still works`, async () => {
        const refused = await send(prod.url, transport, { query: '{ __type(name: "Order") { fields { name } } }' });
        // Two introspection fields (__type, fields), one error in graphql's NoSchemaIntrospectionCustomRule words.
        assert.deepEqual(
          refused.body.errors?.map((e) => [e.message, e.extensions?.code]),
          [
            [
              'GraphQL introspection has been disabled, but the requested query contained the field "__type".',
              'GRAPHQL_VALIDATION_FAILED',
            ],
          ],
        );
        const typename = await send(prod.url, transport, { query: '{ __typename }' });
        assert.deepEqual(typename.body.data, { __typename: 'Query' });
      });

      test(`${transport}: a typo is GRAPHQL_VALIDATION_FAILED without "Did you mean"`, async () => {
        const res = await send(prod.url, transport, { query: '{ recentOrders { idd } }' }, alice);
        assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
        assert.match(res.body.errors![0]!.message, /Cannot query field "idd"/);
        assert.doesNotMatch(res.body.errors![0]!.message, /Did you mean/);
      });

      test(`${transport}: trusted documents run by hash`, async () => {
        const res = await send(trusted.url, transport, {
          query: '',
          extensions: { persistedQuery: { version: 1, sha256Hash: sha256(TRUSTED) } },
        });
        assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
        assert.ok((res.body.data!.products as unknown[]).length > 0);
      });

      test(`${transport}: trusted documents run by documentId`, async () => {
        const res = await send(trusted.url, transport, { documentId: `sha256:${sha256(TRUSTED)}` });
        assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
        assert.ok((res.body.data!.products as unknown[]).length > 0);
      });

      test(`${transport}: a full text runs only when its hash is in the manifest`, async () => {
        const known = await send(trusted.url, transport, { query: TRUSTED });
        assert.equal(known.body.errors, undefined);
        const unknown = await send(trusted.url, transport, { query: UNTRUSTED });
        assert.equal(codeOf(unknown), 'PERSISTED_QUERY_NOT_TRUSTED');
        const introspection = await send(trusted.url, transport, { query: getIntrospectionQuery() });
        assert.equal(codeOf(introspection), 'PERSISTED_QUERY_NOT_TRUSTED');
      });

      test(`${transport}: an unknown hash is PERSISTED_QUERY_NOT_FOUND`, async () => {
        const res = await send(trusted.url, transport, {
          query: '',
          extensions: { persistedQuery: { version: 1, sha256Hash: sha256(UNTRUSTED) } },
        });
        assert.equal(codeOf(res), 'PERSISTED_QUERY_NOT_FOUND');
      });
    }

    for (const transport of TRANSPORTS) {
      test(`${transport}: the limits hold in production too`, async () => {
        const fanOut = await send(prod.url, transport, { query: FAN_OUT }, alice);
        assert.equal(codeOf(fanOut), 'QUERY_TOO_COMPLEX');
        const chained = await send(prod.url, transport, { query: chainedFragments() });
        assert.match(chained.body.errors![0]!.message, /nested \d+ levels deep; at most 12/);
        const aliased = await send(prod.url, transport, { query: aliases(16, '__typename') });
        assert.match(aliased.body.errors![0]!.message, /16 aliases; at most 15/);
        const directives = await send(prod.url, transport, {
          query: `{ ${'__typename @include(if: true) '.repeat(51)}}`,
        });
        assert.match(directives.body.errors![0]!.message, /51 directives; at most 50/);
        const tokens = await send(prod.url, transport, { query: aliases(400, '__typename') });
        assert.equal(codeOf(tokens), 'GRAPHQL_PARSE_FAILED');
        if (transport !== 'get') {
          const mutations = await send(prod.url, transport, { query: createOrders(11) }, alice);
          assert.match(mutations.body.errors![0]!.message, /11 mutation fields; at most 10/);
        }
      });
    }

    for (const transport of ['post', 'ws', 'sse'] as Transport[]) {
      test(`${transport}: a variable error is BAD_USER_INPUT without "Did you mean"`, async () => {
        const res = await send(
          prod.url,
          transport,
          {
            query: 'mutation($input: CreateOrderInput!) { createOrder(input: $input) { id } }',
            variables: { input: { itemz: [] } },
          },
          alice,
        );
        assert.equal(codeOf(res), 'BAD_USER_INPUT');
        assert.match(res.body.errors![0]!.message, /itemz/);
        assert.doesNotMatch(res.body.errors![0]!.message, /Did you mean/);
      });
    }

    test('an anonymous GET /graphql/stream for the schema is refused', async () => {
      const res = await request(prod.url)
        .get('/graphql/stream')
        .query({ query: '{ __schema { types { name fields { name } } } }' })
        .set('accept', 'text/event-stream')
        .buffer(true);
      assert.doesNotMatch(res.text, /"types"/);
      assert.match(res.text, /GRAPHQL_VALIDATION_FAILED/);
    });

    test('APQ registration is off in trusted-documents mode', async () => {
      const extensions = { persistedQuery: { version: 1, sha256Hash: sha256(UNTRUSTED) } };
      await request(trusted.url).post('/graphql').send({ query: UNTRUSTED, extensions }).expect(400);
      const lookup = await send(trusted.url, 'post', { extensions });
      assert.equal(codeOf(lookup), 'PERSISTED_QUERY_NOT_FOUND');
    });
  });
});
