import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import createClient, { type Middleware } from 'openapi-fetch';
import { REST_CLIENT_TYPES, restClientTypes } from '../../scripts/contract/restClient.js';
import type { paths } from '../generated/rest-client.js';
import { assertDocumented } from '../helpers/openapi.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A REST client as a user would generate it: openapi-typescript types from the served document, openapi-fetch
 * sending requests with its defaults (so a PATCH body goes out as `application/json`).
 */
describe('a client generated from the OpenAPI document (openapi-typescript + openapi-fetch)', () => {
  let server: TestServer;
  let alice: string;
  beforeAll(async () => {
    server = await startTestServer();
    alice = await server.token('alice');
  });
  afterAll(() => server.close());

  test('the committed client types are what openapi-typescript generates from the served document', async () => {
    const served = await server.http.get('/v1/openapi.json');
    assert.equal(served.status, 200);
    assert.equal(
      await restClientTypes(served.body),
      readFileSync(REST_CLIENT_TYPES, 'utf8'),
      `${REST_CLIENT_TYPES} is stale: run npm run codegen:rest-client`,
    );
  });

  test('create with Idempotency-Key, conditional GET, PATCH with If-Match, and a stale PATCH refused with 412', async () => {
    const sent: { method: string; contentType: string | null }[] = [];
    const checked: Middleware = {
      onRequest({ request }) {
        sent.push({ method: request.method, contentType: request.headers.get('content-type') });
      },
      // Every answer must be one the document describes, headers and body included.
      async onResponse({ request, response }) {
        assertDocumented(request.method, request.url, response, await response.clone().text());
      },
    };
    const client = createClient<paths>({
      baseUrl: `${server.url}/v1`,
      headers: { authorization: `Bearer ${alice}` },
    });
    client.use(checked);

    const key = randomUUID();
    const body = { items: [{ sku: 'KB-001', qty: 2 }] };
    const created = await client.POST('/orders', { params: { header: { 'Idempotency-Key': key } }, body });
    assert.equal(created.response.status, 201);
    const order = created.data!;
    assert.equal(order.status, 'pending');
    assert.equal(order.total_cents, 17800);
    const etag = created.response.headers.get('etag')!;
    assert.equal(etag, `"${order.id}.v1"`);
    assert.equal(created.response.headers.get('location'), `/v1/orders/${order.id}`);

    const replay = await client.POST('/orders', { params: { header: { 'Idempotency-Key': key } }, body });
    assert.equal(replay.response.status, 201);
    assert.equal(replay.response.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.data!.id, order.id);

    const path = { id: order.id };
    const unchanged = await client.GET('/orders/{id}', { params: { path, header: { 'If-None-Match': etag } } });
    assert.equal(unchanged.response.status, 304);
    assert.equal(unchanged.response.headers.get('etag'), etag);
    assert.equal(unchanged.data, undefined);

    const patched = await client.PATCH('/orders/{id}', {
      params: { path, header: { 'If-Match': etag } },
      body: { status: 'cancelled' },
    });
    assert.equal(patched.response.status, 200, JSON.stringify(patched.error));
    assert.equal(patched.data!.status, 'cancelled');
    const newEtag = patched.response.headers.get('etag');
    assert.equal(newEtag, `"${order.id}.v2"`);
    assert.deepEqual(sent.at(-1), { method: 'PATCH', contentType: 'application/json' });

    const stale = await client.PATCH('/orders/{id}', {
      params: { path, header: { 'If-Match': etag } },
      body: { status: 'cancelled' },
    });
    assert.equal(stale.response.status, 412);
    assert.equal(stale.response.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    assert.equal(stale.data, undefined);
    assert.equal(stale.error!.status, 412);
    assert.equal(stale.error!.code, 'PRECONDITION_FAILED');
    assert.equal(stale.error!.type, '/problems/precondition-failed');

    // The old validator no longer matches: a conditional GET now returns the changed order.
    const changed = await client.GET('/orders/{id}', { params: { path, header: { 'If-None-Match': etag } } });
    assert.equal(changed.response.status, 200);
    assert.equal(changed.response.headers.get('etag'), newEtag);
    assert.equal(changed.data!.status, 'cancelled');
  });
});
