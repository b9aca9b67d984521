import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { rest } from '../helpers/openapi.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const items = [{ sku: 'DL-009', qty: 2 }];

describe('Idempotency-Key on order creation', () => {
  let server: TestServer;
  let alice: string;
  let bob: string;
  beforeAll(async () => {
    server = await startTestServer();
    [alice, bob] = await Promise.all([server.token('alice'), server.token('bob')]);
  });
  afterAll(() => server.close());

  const post = (token: string, key: string | undefined, body: unknown = { items }) =>
    rest(server.url, 'POST', '/orders', { token, body, headers: key === undefined ? {} : { 'idempotency-key': key } });
  const countOrders = async (key: string) =>
    (
      await server.running.app.db.query<{ n: number }>(
        `select count(*)::int as n from orders o join idempotency_keys k on k.order_id = o.id where k.key = $1`,
        [key],
      )
    )[0]!.n;

  test('the same key and body replays the original status, headers and body byte for byte', async () => {
    const key = randomUUID();
    const first = await post(alice, key);
    assert.equal(first.status, 201);
    const again = await post(alice, key);
    assert.equal(again.status, 201);
    assert.equal(again.text, first.text);
    for (const h of ['location', 'etag', 'content-type', 'cache-control'])
      assert.equal(again.headers.get(h), first.headers.get(h), h);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(await countOrders(key), 1);
  });

  test('the replay is of the original response even after the order changed', async () => {
    const key = randomUUID();
    const first = await post(alice, key);
    const cancel = await rest(server.url, 'PATCH', `/orders/${first.json<{ id: string }>().id}`, {
      token: alice,
      body: { status: 'cancelled' },
      headers: { 'if-match': first.headers.get('etag')! },
    });
    assert.equal(cancel.status, 200);
    const again = await post(alice, key);
    assert.equal(again.text, first.text);
    assert.equal(again.json<{ status: string }>().status, 'pending');
  });

  test('the same key with a different body is 422', async () => {
    const key = randomUUID();
    assert.equal((await post(alice, key)).status, 201);
    const other = await post(alice, key, { items: [{ sku: 'DL-009', qty: 3 }] });
    assert.equal(other.status, 422);
    assert.equal(other.json<{ code: string }>().code, 'IDEMPOTENCY_KEY_REUSED');
    assert.equal(await countOrders(key), 1);
  });

  test('keys are scoped to the caller: bob may use the key alice used', async () => {
    const key = randomUUID();
    const a = await post(alice, key);
    const b = await post(bob, key);
    assert.equal(b.status, 201);
    assert.equal(b.headers.get('idempotent-replayed'), null);
    assert.notEqual(b.json<{ id: string }>().id, a.json<{ id: string }>().id);
  });

  test('a missing, empty, over-long or non-ASCII key is 400', async () => {
    for (const key of [undefined, '', 'k'.repeat(256), 'clé']) {
      const res = await post(alice, key);
      assert.equal(res.status, 400, String(key));
      assert.equal(res.json<{ code: string }>().code, 'IDEMPOTENCY_KEY_REQUIRED');
    }
    assert.equal((await post(alice, 'k'.repeat(255))).status, 201);
  });

  test('a request refused as invalid does not store the key: the corrected retry succeeds', async () => {
    const key = randomUUID();
    const bad = await post(alice, key, { items: [{ sku: 'NOPE', qty: 1 }] });
    assert.equal(bad.status, 422);
    const good = await post(alice, key);
    assert.equal(good.status, 201);
    assert.equal(good.headers.get('idempotent-replayed'), null);
  });

  test('a failure inside the transaction leaves neither the order nor the key', async () => {
    const key = randomUUID();
    const db = server.running.app.db;
    // A real fault on the database side: the items insert fails after the order row was written.
    await db.query(`create or replace function fail_items() returns trigger language plpgsql as $$
      begin if new.sku = 'PN-019' then raise exception 'simulated fault'; end if; return new; end $$`);
    await db.query('create trigger fail_items before insert on order_items for each row execute function fail_items()');
    try {
      const failed = await post(alice, key, { items: [{ sku: 'PN-019', qty: 1 }] });
      assert.equal(failed.status, 500);
      assert.equal(failed.json<{ code: string }>().code, 'INTERNAL_SERVER_ERROR');
      const [row] = await db.query<{ n: number }>('select count(*)::int as n from idempotency_keys where key = $1', [
        key,
      ]);
      assert.equal(row!.n, 0);
    } finally {
      await db.query('drop trigger fail_items on order_items');
    }
    const retry = await post(alice, key, { items: [{ sku: 'PN-019', qty: 1 }] });
    assert.equal(retry.status, 201, 'the 5xx did not poison the key');
    assert.equal(retry.headers.get('idempotent-replayed'), null);
    assert.equal(await countOrders(key), 1);
  });

  test('GraphQL createOrder shares the key store with REST', async () => {
    const key = randomUUID();
    const created = await post(alice, key);
    const id = created.json<{ id: string }>().id;
    const mutation = `mutation($key: String) { createOrder(input: { items: [{ sku: "DL-009", qty: 2 }] }, idempotencyKey: $key) { id } }`;
    const viaGraphql = await server.gql(mutation, { key }, { token: alice });
    assert.deepEqual(viaGraphql.body.data, { createOrder: { id } });
    const differs = await server.gql(
      `mutation($key: String) { createOrder(input: { items: [{ sku: "DL-009", qty: 5 }] }, idempotencyKey: $key) { id } }`,
      { key },
      { token: alice },
    );
    assert.equal(differs.body.errors?.[0]?.extensions?.code, 'IDEMPOTENCY_KEY_REUSED');

    const gqlKey = randomUUID();
    const first = await server.gql(mutation, { key: gqlKey }, { token: alice });
    const second = await server.gql(mutation, { key: gqlKey }, { token: alice });
    assert.deepEqual(second.body.data, first.body.data);
    const overRest = await post(alice, gqlKey);
    assert.equal(overRest.status, 201);
    assert.equal(overRest.headers.get('idempotent-replayed'), 'true');
    assert.equal(
      overRest.json<{ id: string }>().id,
      (first.body.data as { createOrder: { id: string } }).createOrder.id,
    );
    assert.equal(await countOrders(gqlKey), 1);
  });

  test('GraphQL refuses a malformed idempotency key', async () => {
    const res = await server.gql(
      `mutation { createOrder(input: { items: [{ sku: "DL-009", qty: 1 }] }, idempotencyKey: "") { id } }`,
      undefined,
      { token: alice },
    );
    assert.equal(res.body.errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
  });
});
