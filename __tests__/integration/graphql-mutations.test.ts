import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface Placed {
  id: string;
  status: string;
  totalCents: number;
  version: number;
  etag: string;
  items: { sku: string; qty: number; unitPriceCents: number; lineTotalCents: number }[];
  customer: { name: string };
}

const CREATE = `mutation($input: CreateOrderInput!) {
  createOrder(input: $input) { id status totalCents version etag items { sku qty unitPriceCents lineTotalCents } customer { name } }
}`;
const SET_STATUS = `mutation($id: ID!, $status: String!, $etag: String) {
  updateOrderStatus(id: $id, status: $status, etag: $etag) { id status version etag }
}`;
const CANCEL = `mutation($id: ID!) { cancelOrder(id: $id) { id status } }`;

describe('GraphQL mutations', () => {
  let server: TestServer;
  let alice: string;
  let bob: string;
  let carol: string;
  beforeAll(async () => {
    server = await startTestServer();
    ({ alice, bob, carol } = await server.users());
  });
  afterAll(() => server.close());

  const place = async (
    token: string,
    items = [
      { sku: 'KB-001', qty: 2 },
      { sku: 'CB-007', qty: 3 },
    ],
  ) => {
    const res = await server.gql(CREATE, { input: { items } }, { token });
    assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
    return (res.body.data as { createOrder: Placed }).createOrder;
  };

  test('createOrder prices lines from the catalogue and starts pending at version 1', async () => {
    const order = await place(alice);
    assert.match(order.id, /^ord_[0-9a-z]{26}$/);
    assert.equal(order.status, 'pending');
    assert.equal(order.version, 1);
    assert.equal(order.etag, `"${order.id}.v1"`);
    assert.equal(order.totalCents, 2 * 8900 + 3 * 1200);
    assert.deepEqual(order.items, [
      { sku: 'KB-001', qty: 2, unitPriceCents: 8900, lineTotalCents: 17800 },
      { sku: 'CB-007', qty: 3, unitPriceCents: 1200, lineTotalCents: 3600 },
    ]);
    assert.equal(order.customer.name, 'Alice Adams');
  });

  test('createOrder reports every invalid line with a JSON pointer', async () => {
    const res = await server.gql(
      CREATE,
      {
        input: {
          items: [
            { sku: 'NOPE-1', qty: 1 },
            { sku: 'KB-001', qty: 0 },
            { sku: 'KB-001', qty: 1000 },
          ],
        },
      },
      { token: alice },
    );
    assert.deepEqual(res.body.data, { createOrder: null });
    assert.equal(res.body.errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
    assert.deepEqual(res.body.errors?.[0]?.extensions?.invalid, [
      { pointer: '/items/0/sku', reason: 'unknown SKU "NOPE-1"' },
      { pointer: '/items/1/qty', reason: 'must be an integer from 1 to 999' },
      { pointer: '/items/2/qty', reason: 'must be an integer from 1 to 999' },
    ]);
  });

  test('createOrder refuses an empty order', async () => {
    const res = await server.gql(CREATE, { input: { items: [] } }, { token: alice });
    assert.deepEqual(res.body.errors?.[0]?.extensions?.invalid, [
      { pointer: '/items', reason: 'must hold 1 to 100 lines' },
    ]);
  });

  test('a customer cannot order for someone else; staff can', async () => {
    const bobsOrder = await place(bob);
    const bobId = (
      (await server.gql(`query($id: ID!) { order(id: $id) { customer { id } } }`, { id: bobsOrder.id }, { token: bob }))
        .body.data as { order: { customer: { id: string } } }
    ).order.customer.id;
    const items = [{ sku: 'MS-002', qty: 1 }];
    const refused = await server.gql(CREATE, { input: { customerId: bobId, items } }, { token: alice });
    assert.equal(refused.body.errors?.[0]?.extensions?.code, 'FORBIDDEN');
    const allowed = await server.gql(CREATE, { input: { customerId: bobId, items } }, { token: carol });
    assert.equal((allowed.body.data as { createOrder: Placed }).createOrder.customer.name, 'Bob Brown');
  });

  test('staff drive the lifecycle; an etag makes a change conditional', async () => {
    const order = await place(alice);
    const paid = await server.gql(SET_STATUS, { id: order.id, status: 'paid', etag: order.etag }, { token: carol });
    assert.deepEqual(paid.body.data, {
      updateOrderStatus: { id: order.id, status: 'paid', version: 2, etag: `"${order.id}.v2"` },
    });
    const stale = await server.gql(SET_STATUS, { id: order.id, status: 'shipped', etag: order.etag }, { token: carol });
    assert.equal(stale.body.errors?.[0]?.extensions?.code, 'PRECONDITION_FAILED');
    assert.deepEqual(stale.body.data, { updateOrderStatus: null });
    const shipped = await server.gql(SET_STATUS, { id: order.id, status: 'shipped' }, { token: carol });
    assert.equal((shipped.body.data as { updateOrderStatus: { status: string } }).updateOrderStatus.status, 'shipped');
    const backwards = await server.gql(SET_STATUS, { id: order.id, status: 'pending' }, { token: carol });
    assert.equal(backwards.body.errors?.[0]?.extensions?.code, 'INVALID_TRANSITION');
    const cancel = await server.gql(CANCEL, { id: order.id }, { token: carol });
    assert.equal(cancel.body.errors?.[0]?.extensions?.code, 'INVALID_TRANSITION');
    const unknown = await server.gql(SET_STATUS, { id: order.id, status: 'lost' }, { token: carol });
    assert.equal(unknown.body.errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
  });

  test('a customer may cancel their own pending order, and nothing else', async () => {
    const order = await place(alice);
    const pay = await server.gql(SET_STATUS, { id: order.id, status: 'paid' }, { token: alice });
    assert.equal(pay.body.errors?.[0]?.extensions?.code, 'FORBIDDEN');
    const cancelled = await server.gql(CANCEL, { id: order.id }, { token: alice });
    assert.deepEqual(cancelled.body.data, { cancelOrder: { id: order.id, status: 'cancelled' } });

    const paidOrder = await place(alice);
    await server.gql(SET_STATUS, { id: paidOrder.id, status: 'paid' }, { token: carol });
    const late = await server.gql(CANCEL, { id: paidOrder.id }, { token: alice });
    assert.equal(late.body.errors?.[0]?.extensions?.code, 'FORBIDDEN');
  });

  test("someone else's order is NOT_FOUND for a write, never FORBIDDEN", async () => {
    const order = await place(bob);
    const res = await server.gql(CANCEL, { id: order.id }, { token: alice });
    assert.equal(res.body.errors?.[0]?.extensions?.code, 'NOT_FOUND');
  });

  test('mutations run in order: the second sees the first', async () => {
    const order = await place(alice);
    const res = await server.gql(
      `mutation($id: ID!) {
        a: updateOrderStatus(id: $id, status: "paid") { status version }
        b: updateOrderStatus(id: $id, status: "shipped") { status version }
        c: updateOrderStatus(id: $id, status: "delivered") { status version }
      }`,
      { id: order.id },
      { token: carol },
    );
    assert.deepEqual(res.body.data, {
      a: { status: 'paid', version: 2 },
      b: { status: 'shipped', version: 3 },
      c: { status: 'delivered', version: 4 },
    });
  });

  test('anonymous writes are UNAUTHENTICATED', async () => {
    const res = await server.gql(CREATE, { input: { items: [{ sku: 'KB-001', qty: 1 }] } });
    assert.deepEqual(res.body.data, { createOrder: null });
    assert.equal(res.body.errors?.[0]?.extensions?.code, 'UNAUTHENTICATED');
  });
});
