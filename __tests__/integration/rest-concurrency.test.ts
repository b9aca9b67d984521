import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { rest } from '../helpers/openapi.js';
import { startReplicas, stopReplicas, type TestServer } from '../helpers/server.js';

describe('REST under concurrency, two app instances on one database', () => {
  let a: TestServer;
  let b: TestServer;
  let alice: string;
  let carol: string;
  beforeAll(async () => {
    ({ a, b } = await startReplicas());
    ({ alice, carol } = await a.users());
  });
  afterAll(() => stopReplicas({ a, b }));

  test('50 concurrent POSTs with one key across both instances create exactly one order', async () => {
    const key = randomUUID();
    const body = { items: [{ sku: 'SD-015', qty: 1 }] };
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        rest((i % 2 ? b : a).url, 'POST', '/orders', { token: alice, body, headers: { 'idempotency-key': key } }),
      ),
    );
    const statuses = responses.map((r) => r.status);
    assert.ok(
      statuses.every((s) => s === 201 || s === 409),
      `statuses: ${statuses.join(',')}`,
    );
    const created = responses.filter((r) => r.status === 201);
    assert.ok(created.length >= 1);
    assert.equal(new Set(created.map((r) => r.text)).size, 1, 'every 201 carries the same body');
    assert.equal(created.filter((r) => r.headers.get('idempotent-replayed') === null).length, 1, 'one original');
    for (const r of responses.filter((r) => r.status === 409)) {
      assert.equal(r.json<{ code: string }>().code, 'IDEMPOTENCY_KEY_IN_USE');
      assert.equal(r.headers.get('retry-after'), '1');
    }
    const [row] = await a.running.app.db.query<{ n: number }>(
      `select count(*)::int as n from orders where id in (select order_id from idempotency_keys where key = $1)`,
      [key],
    );
    assert.equal(row!.n, 1);
  });

  test('50 concurrent PATCHes with the same If-Match: exactly one 200, the rest 412, version +1', async () => {
    const created = await rest(a.url, 'POST', '/orders', {
      token: alice,
      body: { items: [{ sku: 'KB-001', qty: 1 }] },
      headers: { 'idempotency-key': randomUUID() },
    });
    const { id } = created.json<{ id: string }>();
    const etag = created.headers.get('etag')!;
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        rest((i % 2 ? b : a).url, 'PATCH', `/orders/${id}`, {
          token: carol,
          body: { status: 'paid' },
          headers: { 'if-match': etag },
        }),
      ),
    );
    const statuses = responses.map((r) => r.status).sort();
    assert.equal(statuses.filter((s) => s === 200).length, 1, `statuses: ${statuses.join(',')}`);
    assert.equal(statuses.filter((s) => s === 412).length, 49);
    const [row] = await a.running.app.db.query<{ version: number; status: string }>(
      'select version, status from orders where id = $1',
      [id],
    );
    assert.deepEqual(row, { version: 2, status: 'paid' });
  });
});
