import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import type { Response as SuperResponse } from 'supertest';
import { authCookies } from '../../src/http/middleware/index.js';
import { http, textOf } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { codeOf, send, TRANSPORTS } from '../helpers/transports.js';

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
    development = await startTestServer();
    // Production refuses the embedded IdP and database: it trusts development's IdP and shares its database.
    production = await startTestServer(
      { NODE_ENV: 'production', OIDC_ISSUER: development.running.app.issuer },
      { sameDatabaseAs: development },
    );
  });
  afterAll(async () => {
    await production.close();
    await development.close();
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
