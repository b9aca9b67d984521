import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface OrderRef {
  id: string;
  status: string;
  createdAt: string;
  customer: { id: string; name: string };
}

describe('GraphQL queries', () => {
  let server: TestServer;
  let alice: string;
  let bob: string;
  let carol: string;
  beforeAll(async () => {
    server = await startTestServer();
    ({ alice, bob, carol } = await server.users());
  });
  afterAll(() => server.close());

  test('introspection shows the reference fields with their exact types and defaults', async () => {
    const { status, body } = await server.gql(`{
      __type(name: "Query") { fields { name type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }
        args { name defaultValue type { kind name ofType { kind name } } } } }
      order: __type(name: "Order") { fields(includeDeprecated: true) { name type { kind name ofType { kind name } } } }
      customer: __type(name: "Customer") { fields { name type { kind name ofType { kind name } } } }
    }`);
    assert.equal(status, 200);
    const data = body.data as {
      __type: { fields: { name: string; type: unknown; args: unknown[] }[] };
      order: { fields: { name: string; type: unknown }[] };
      customer: { fields: { name: string; type: unknown }[] };
    };
    const field = (name: string) => data.__type.fields.find((f) => f.name === name)!;
    assert.deepEqual(field('order').type, { kind: 'OBJECT', name: 'Order', ofType: null });
    assert.deepEqual(field('order').args, [
      {
        name: 'id',
        defaultValue: null,
        type: { kind: 'NON_NULL', name: null, ofType: { kind: 'SCALAR', name: 'ID' } },
      },
    ]);
    assert.deepEqual(field('recentOrders').type, {
      kind: 'NON_NULL',
      name: null,
      ofType: {
        kind: 'LIST',
        name: null,
        ofType: { kind: 'NON_NULL', name: null, ofType: { kind: 'OBJECT', name: 'Order' } },
      },
    });
    assert.deepEqual(field('recentOrders').args, [
      { name: 'first', defaultValue: '20', type: { kind: 'SCALAR', name: 'Int', ofType: null } },
    ]);
    const typeOf = (fields: { name: string; type: unknown }[], name: string) =>
      fields.find((f) => f.name === name)!.type;
    assert.deepEqual(typeOf(data.order.fields, 'id'), {
      kind: 'NON_NULL',
      name: null,
      ofType: { kind: 'SCALAR', name: 'ID' },
    });
    assert.deepEqual(typeOf(data.order.fields, 'status'), {
      kind: 'NON_NULL',
      name: null,
      ofType: { kind: 'SCALAR', name: 'String' },
    });
    assert.deepEqual(typeOf(data.order.fields, 'customer'), {
      kind: 'NON_NULL',
      name: null,
      ofType: { kind: 'OBJECT', name: 'Customer' },
    });
    assert.deepEqual(typeOf(data.customer.fields, 'id'), {
      kind: 'NON_NULL',
      name: null,
      ofType: { kind: 'SCALAR', name: 'ID' },
    });
    assert.deepEqual(typeOf(data.customer.fields, 'name'), {
      kind: 'NON_NULL',
      name: null,
      ofType: { kind: 'SCALAR', name: 'String' },
    });
  });

  test('recentOrders returns 20 by default, caps first at 100, newest first', async () => {
    const q = `query($first: Int) { recentOrders(first: $first) { id createdAt } }`;
    const byDefault = await server.gql(`{ recentOrders { id createdAt } }`, undefined, { token: carol });
    const capped = await server.gql(q, { first: 1000 }, { token: carol });
    const one = await server.gql(q, { first: 1 }, { token: carol });
    const none = await server.gql(q, { first: 0 }, { token: carol });
    const list = (r: typeof byDefault) =>
      (r.body.data as { recentOrders: { id: string; createdAt: string }[] }).recentOrders;
    assert.equal(list(byDefault).length, 20);
    assert.equal(list(capped).length, 100);
    assert.equal(list(one).length, 1);
    assert.equal(list(none).length, 0);
    const times = list(capped).map((o) => Date.parse(o.createdAt));
    assert.deepEqual(
      times,
      [...times].sort((a, b) => b - a),
    );
    assert.equal(list(one)[0]!.id, list(capped)[0]!.id);
  });

  test('a negative first is a BAD_USER_INPUT error', async () => {
    const { body } = await server.gql(`{ recentOrders(first: -1) { id } }`, undefined, { token: carol });
    assert.equal(body.data, null);
    assert.equal(body.errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
    assert.deepEqual(body.errors?.[0]?.path, ['recentOrders']);
  });

  /** POST /graphql as carol, counting only the SQL this one request runs (not the event bus's background poll). */
  const counted = (query: string, variables?: Record<string, unknown>) =>
    server.sqlStatementsOf((agent) =>
      agent
        .post('/graphql')
        .set({ 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${carol}` })
        .send(JSON.stringify({ query, variables })),
    );

  test('recentOrders with customers costs the same number of SQL statements for 100 orders as for 1', async () => {
    const q = `query($first: Int) { recentOrders(first: $first) { id status customer { id name } } }`;
    await server.gql(q, { first: 1 }, { token: carol }); // warm the catalogue and customer caches
    const cost = async (first: number) => {
      const { res, statements } = await counted(q, { first });
      assert.equal(res.body.errors, undefined);
      assert.equal((res.body.data as { recentOrders: unknown[] }).recentOrders.length, first);
      return statements;
    };
    const one = await cost(1);
    const hundred = await cost(100);
    assert.equal(hundred, one);
    assert.equal(one, 2, 'one statement for the orders, one batched statement for their customers');
  });

  test('order items and customer orders are batched too', async () => {
    const q = `query($first: Int) { recentOrders(first: $first) { id items { sku qty product { name } } customer { orders(first: 3) { id } } } }`;
    await server.gql(q, { first: 1 }, { token: carol });
    const cost = async (first: number) => {
      const { res, statements } = await counted(q, { first });
      assert.equal(res.body.errors, undefined);
      assert.ok(statements > 0, 'the count sees this request');
      return statements;
    };
    assert.equal(await cost(100), await cost(1));
  });

  test("alice sees her own orders only; bob's order is null for her; carol (staff) sees both", async () => {
    const mine = `{ recentOrders(first: 100) { id customer { name } } }`;
    const aliceList = (await server.gql(mine, undefined, { token: alice })).body.data as { recentOrders: OrderRef[] };
    const bobList = (await server.gql(mine, undefined, { token: bob })).body.data as { recentOrders: OrderRef[] };
    assert.ok(aliceList.recentOrders.length > 5);
    assert.ok(bobList.recentOrders.length > 5);
    assert.deepEqual(new Set(aliceList.recentOrders.map((o) => o.customer.name)), new Set(['Alice Adams']));
    assert.deepEqual(new Set(bobList.recentOrders.map((o) => o.customer.name)), new Set(['Bob Brown']));

    const bobsOrder = bobList.recentOrders[0]!.id;
    const aliceOrder = aliceList.recentOrders[0]!.id;
    const byId = `query($id: ID!) { order(id: $id) { id customer { name } } }`;
    const aliceReadsBob = await server.gql(byId, { id: bobsOrder }, { token: alice });
    assert.deepEqual(aliceReadsBob.body.data, { order: null });

    const carolReadsBob = await server.gql(byId, { id: bobsOrder }, { token: carol });
    assert.deepEqual(carolReadsBob.body.data, { order: { id: bobsOrder, customer: { name: 'Bob Brown' } } });
    const carolReadsAlice = await server.gql(byId, { id: aliceOrder }, { token: carol });
    assert.deepEqual(carolReadsAlice.body.data, { order: { id: aliceOrder, customer: { name: 'Alice Adams' } } });

    const carolList = (await server.gql(mine, undefined, { token: carol })).body.data as { recentOrders: OrderRef[] };
    assert.ok(new Set(carolList.recentOrders.map((o) => o.customer.name)).size > 2);
  });

  test('an unknown order id is null, not an error', async () => {
    const res = await server.gql(`{ order(id: "ord_00000000000000000000000000") { id } }`, undefined, { token: carol });
    assert.deepEqual(res.body.data, { order: null });
  });

  test('anonymous callers get public fields, and UNAUTHENTICATED for order data', async () => {
    const pub = await server.gql(`{ products { sku } viewer { subject } }`);
    assert.equal(pub.status, 200);
    assert.equal((pub.body.data as { products: unknown[] }).products.length, 20);
    assert.equal((pub.body.data as { viewer: unknown }).viewer, null);

    const priv = await server.gql(`{ recentOrders { id } }`);
    assert.equal(priv.status, 200);
    assert.equal(priv.body.data, null);
    assert.equal(priv.body.errors?.[0]?.extensions?.code, 'UNAUTHENTICATED');
    assert.deepEqual(priv.body.errors?.[0]?.path, ['recentOrders']);
  });

  test('viewer reports the caller, roles and scopes, and provisions the customer just in time', async () => {
    const res = await server.gql(`{ viewer { subject roles scopes customer { name email } } }`, undefined, {
      token: carol,
    });
    const viewer = (
      res.body.data as { viewer: { subject: string; roles: string[]; scopes: string[]; customer: unknown } }
    ).viewer;
    assert.equal(res.body.errors, undefined);
    assert.equal(viewer.subject, 'carol');
    assert.deepEqual(viewer.roles, ['staff']);
    assert.ok(viewer.scopes.includes('orders:read') && viewer.scopes.includes('orders:write'));
    assert.deepEqual(viewer.customer, { name: 'Carol Clark', email: 'carol@example.com' });
  });

  describe('request errors: errors without data, nothing executed', () => {
    const requestError = async (query: string, variables?: Record<string, unknown>, operationName?: string) => {
      const { res, statements } = await server.sqlStatementsOf((agent) =>
        agent
          .post('/graphql')
          .set({ 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${carol}` })
          .send(JSON.stringify({ query, variables, operationName })),
      );
      const body = res.body as { data?: unknown; errors: { extensions: { code: string } }[] };
      assert.equal(res.status, 200);
      assert.equal('data' in body, false);
      assert.equal(body.errors.length >= 1, true);
      assert.equal(statements, 0, 'no SQL ran');
      return body.errors[0]!.extensions.code;
    };

    test('a syntax error', async () => {
      assert.equal(await requestError('{ recentOrders { id }'), 'GRAPHQL_PARSE_FAILED');
    });
    test('an unknown field', async () => {
      assert.equal(await requestError('{ recentOrders { id nope } }'), 'GRAPHQL_VALIDATION_FAILED');
    });
    test('a variable of the wrong type', async () => {
      assert.equal(
        await requestError('query($n: Int) { recentOrders(first: $n) { id } }', { n: 'ten' }),
        'BAD_USER_INPUT',
      );
    });
    test('a missing operation name in a document with two operations', async () => {
      assert.equal(
        await requestError('query A { recentOrders { id } } mutation B { cancelOrder(id: "x") { id } }'),
        'OPERATION_RESOLUTION_FAILURE',
      );
    });
    test('an operation name the document does not hold, with one operation or two', async () => {
      for (const document of [
        'query A { recentOrders { id } }',
        'query A { recentOrders { id } } query B { products { sku } }',
      ]) {
        const res = await server.http
          .post('/graphql')
          .set({ 'content-type': 'application/json', accept: 'application/graphql-response+json' })
          .send(JSON.stringify({ query: document, operationName: 'C' }));
        assert.equal(res.status, 400);
        assert.deepEqual(JSON.parse(res.text), {
          errors: [{ message: 'Unknown operation named "C".', extensions: { code: 'OPERATION_RESOLUTION_FAILURE' } }],
        });
        assert.equal(await requestError(document, undefined, 'C'), 'OPERATION_RESOLUTION_FAILURE');
      }
    });
    test('an operation nested deeper than the limit', async () => {
      let selection = 'id';
      for (let i = 0; i < 6; i++) selection = `customer { orders { ${selection} } }`;
      const deep = `{ recentOrders { ${selection} } }`; // 14 levels
      assert.equal(await requestError(deep), 'GRAPHQL_VALIDATION_FAILED');
    });
  });

  test('suggestions stay on outside production ("Did you mean")', async () => {
    const res = await server.gql(`{ recentOrder { id } }`, undefined, { token: carol });
    assert.match(res.body.errors?.[0]?.message ?? '', /Did you mean "recentOrders"/);
  });

  test('a resolver failure nulls that field, reports its path, and propagates to the nearest nullable parent', async () => {
    const [first] = (
      (await server.gql(`{ recentOrders(first: 1) { id } }`, undefined, { token: carol })).body.data as {
        recentOrders: { id: string }[];
      }
    ).recentOrders;
    const res = await server.gql(
      `query($id: ID!) { order(id: $id) { id customer { name orders(first: -1) { id } } } products { sku } }`,
      { id: first!.id },
      { token: carol },
    );
    assert.equal(res.status, 200);
    const data = res.body.data as { order: unknown; products: unknown[] };
    // orders is non-null, so is Order.customer: the null lands on the nullable `order`.
    assert.equal(data.order, null);
    assert.equal(data.products.length, 20);
    assert.deepEqual(res.body.errors, [
      {
        message: '/first: must be a non-negative integer',
        locations: [{ line: 1, column: 55 }],
        path: ['order', 'customer', 'orders'],
        extensions: {
          code: 'BAD_USER_INPUT',
          invalid: [{ pointer: '/first', reason: 'must be a non-negative integer' }],
        },
      },
    ]);
  });
});
