import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('small things a developer meets first', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server?.close());

  test('GET /favicon.ico is an empty 204 a browser may cache, not a 404', async () => {
    const res = await server.http.get('/favicon.ico');
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    assert.equal(res.get('cache-control'), 'public, max-age=86400');
  });

  test('DateTime keeps the description schema.graphql gives it, and its specifiedByURL', async () => {
    const res = await server.gql('{ __type(name: "DateTime") { kind description specifiedByURL } }');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.data, {
      __type: {
        kind: 'SCALAR',
        description: 'An instant in time, as an RFC 3339 / ISO 8601 string in UTC, e.g. `2026-11-22T09:30:00.000Z`.',
        specifiedByURL: 'https://www.rfc-editor.org/rfc/rfc3339',
      },
    });
  });
});
