import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('operational endpoints', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  test('/metrics counts GraphQL errors by code, apart from HTTP statuses', async () => {
    await server.gql('{ recentOrders { id } }'); // anonymous: UNAUTHENTICATED inside a 200
    const { text } = await server.http.get('/metrics');
    assert.match(text, /^graphql_errors_total\{code="UNAUTHENTICATED"\} [1-9]/m);
    assert.match(text, /^http_requests_total\{route="\/graphql",method="POST",status="200"\} [1-9]/m);
    assert.match(text, /^sql_statements_total [1-9]/m);
  });

  test('the root names the entry points', async () => {
    const res = await server.http.get('/');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      service: 'orders-api',
      graphql: '/graphql',
      rest: '/v1/orders',
      openapi: '/v1/openapi.json',
      signIn: '/auth/login',
      session: '/auth/session',
    });
  });

  test('an unknown path is a 404 problem+json', async () => {
    const res = await server.http.get('/nope?x=1');
    assert.equal(res.status, 404);
    assert.equal(res.get('content-type'), 'application/problem+json; charset=utf-8');
    assert.deepEqual(res.body, {
      type: '/problems/route-not-found',
      title: 'No such resource',
      status: 404,
      detail: 'Nothing is served at /nope.',
      instance: '/nope?x=1',
      code: 'ROUTE_NOT_FOUND',
    });
  });

  test('/readyz turns 503 once draining starts, while /healthz stays 200', async () => {
    // A second instance over the same database: draining it leaves the file's server alone.
    const own = await startTestServer({}, { sameDatabaseAs: server });
    try {
      assert.equal((await own.http.get('/readyz')).status, 200);
      own.running.app.startDraining();
      const ready = await own.http.get('/readyz');
      assert.equal(ready.status, 503);
      assert.deepEqual(ready.body, { status: 'draining' });
      assert.equal((await own.http.get('/healthz')).status, 200);
    } finally {
      await own.close();
    }
  });

  test('a restart keeps the identity provider keys, so issued tokens stay valid', async () => {
    const token = await server.token('alice');
    const jwks = (await server.http.get('/idp/jwks')).body as unknown;
    assert.ok((jwks as { keys: unknown[] }).keys.length >= 1);
    // The keys live in the database: the IdP re-reads them instead of generating new ones.
    const [row] = await server.running.app.db.query<{ n: number }>('select count(*)::int as n from idp_keys');
    assert.equal(row!.n, 1);
    const res = await server.gql('{ viewer { subject } }', undefined, { token });
    assert.deepEqual(res.body.data, { viewer: { subject: 'alice' } });
  });
});
