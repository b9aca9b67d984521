// GraphQL's queries, mutations and limits, and GraphQL over HTTP, in one Jest file: a file loads its modules into a
// fresh context and costs about 1.5 s of CPU before its first test (docs/testing.md#how-long-it-takes). Each top-level
// describe block below was a test file of its own, named after it (the comment above it gives the old file name), with
// its tests unchanged, starting the servers it starts; none shares a server with another block.
import assert from 'node:assert/strict';
import { zstdCompressSync } from 'node:zlib';
import { beforeAll, describe, test } from '@jest/globals';
import { getIntrospectionQuery } from 'graphql';
import { serverAudits } from 'graphql-http';
import request from 'supertest';
import { aliases, chainedFragments, createOrders, FAN_OUT } from '../helpers/hostile.js';
import { type TestServer } from '../helpers/server.js';
import { sharedTestServer } from '../helpers/sharedServer.js';
import { codeOf, send, type Transport, TRANSPORTS } from '../helpers/transports.js';

/** The default server, for the blocks below that own their data (see the helper). */
const sharedServer = sharedTestServer();

// ─── was __tests__/integration/graphql-queries.test.ts ───
describe('graphql-queries', () => {
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
      server = await sharedServer();
      ({ alice, bob, carol } = await server.users());
    });

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
      const res = await server.gql(`{ order(id: "ord_00000000000000000000000000") { id } }`, undefined, {
        token: carol,
      });
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
});

// ─── was __tests__/integration/graphql-mutations.test.ts ───
describe('graphql-mutations', () => {
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
      server = await sharedServer();
      ({ alice, bob, carol } = await server.users());
    });

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
        (
          await server.gql(
            `query($id: ID!) { order(id: $id) { customer { id } } }`,
            { id: bobsOrder.id },
            { token: bob },
          )
        ).body.data as { order: { customer: { id: string } } }
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
      const stale = await server.gql(
        SET_STATUS,
        { id: order.id, status: 'shipped', etag: order.etag },
        { token: carol },
      );
      assert.equal(stale.body.errors?.[0]?.extensions?.code, 'PRECONDITION_FAILED');
      assert.deepEqual(stale.body.data, { updateOrderStatus: null });
      const shipped = await server.gql(SET_STATUS, { id: order.id, status: 'shipped' }, { token: carol });
      assert.equal(
        (shipped.body.data as { updateOrderStatus: { status: string } }).updateOrderStatus.status,
        'shipped',
      );
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
});

// ─── was __tests__/integration/graphql-limits.test.ts ───
describe('graphql-limits', () => {
  type Agent = ReturnType<typeof request>;

  const INTROSPECTION_VARIANTS = [
    getIntrospectionQuery(),
    getIntrospectionQuery({
      descriptions: true,
      specifiedByUrl: true,
      directiveIsRepeatable: true,
      schemaDescription: true,
      inputValueDeprecation: true,
    }),
    getIntrospectionQuery({ descriptions: false }),
  ];

  describe('GraphQL limits on every transport (development)', () => {
    let server: TestServer;
    let alice: string;
    let carol: string;
    beforeAll(async () => {
      server = await sharedServer();
      ({ alice, carol } = await server.users());
    });

    /** Alice's newest order: a refused batch of createOrder must leave it as it was. */
    const newestOrder = async () => {
      const res = await send(server.url, 'post', { query: '{ recentOrders(first: 1) { id } }' }, alice);
      return (res.body.data!.recentOrders as { id: string }[])[0]?.id;
    };

    /** Queries the pipeline admitted to run, on every transport (graphql_operations_total). */
    const admittedQueries = () => server.counter('graphql_operations_total{type="query"}').catch(() => 0);

    test('a document is parsed, held to the limits and validated once on every transport; a refused one is not kept', async () => {
      const parses = async () => ({
        prepare: await server.counter('graphql_document_parses_total{by="prepare"}'),
        apollo: await server.counter('graphql_document_parses_total{by="apollo"}'),
      });
      const before = await parses();
      // A text no other test sends: its record is built on the first request and read by the seven others.
      const query = '{ products { sku name } } # prepared once';
      for (const transport of TRANSPORTS) {
        for (let i = 0; i < 2; i++) {
          const res = await send(server.url, transport, { query });
          assert.equal(res.body.errors, undefined, `${transport} ${JSON.stringify(res.body.errors)}`);
        }
      }
      assert.deepEqual(await parses(), { prepare: before.prepare + 1, apollo: before.apollo });
      // Over the limits: refused where the record would be built, each time (nothing is kept), and never by Apollo.
      for (let i = 0; i < 2; i++) {
        const aliased = await send(server.url, 'post', { query: aliases(16, '__typename') });
        assert.match(aliased.body.errors![0]!.message, /16 aliases; at most 15/);
      }
      assert.deepEqual(await parses(), { prepare: before.prepare + 3, apollo: before.apollo });
      // One that does not validate has no record either: Apollo parses it again to report its errors as it always has.
      const typo = await send(server.url, 'post', { query: '{ products { skuu } }' });
      assert.equal(codeOf(typo), 'GRAPHQL_VALIDATION_FAILED');
      assert.deepEqual(await parses(), { prepare: before.prepare + 4, apollo: before.apollo + 1 });
    });

    test('the refused fan-out query sends no SQL statement over HTTP and SSE, where a one-order query sends some', async () => {
      const auth = { authorization: `Bearer ${carol}` };
      const over = {
        post: (query: string) => (agent: Agent) =>
          agent.post('/graphql').set(auth).set('accept', 'application/json').send({ query }),
        get: (query: string) => (agent: Agent) =>
          agent
            .get('/graphql')
            .set(auth)
            .set({ accept: 'application/json', 'apollo-require-preflight': 'true' })
            .query({ query }),
        sse: (query: string) => (agent: Agent) =>
          agent.get('/graphql/stream').set(auth).set('accept', 'text/event-stream').query({ query }).buffer(true),
      };
      // A token's first request on a replica also notes its owner's roles for webhooks (one statement, before any
      // query): carol's is seen once first, so what is counted below is the queries' own.
      assert.equal((await send(server.url, 'post', { query: '{ __typename }' }, carol)).status, 200);
      for (const [transport, build] of Object.entries(over)) {
        const refused = await server.sqlStatementsOf(build(FAN_OUT));
        assert.equal(refused.res.status, 200, transport);
        assert.match(refused.res.text, /QUERY_TOO_COMPLEX/, transport);
        assert.equal(refused.statements, 0, `${transport}: statements of the refused query`);
        const admitted = await admittedQueries();
        const control = await server.sqlStatementsOf(build('{ recentOrders(first: 1) { id } }'));
        assert.equal(control.res.status, 200, transport);
        assert.equal(await admittedQueries(), admitted + 1, `${transport}: a query that runs is counted admitted`);
        assert.ok(control.statements > 0, `${transport}: the same path counts the statements of a query that runs`);
      }
    });

    for (const transport of ['ws', 'sse'] as const) {
      test(`${transport}: a subscription is held to MAX_SUBSCRIPTION_COST per event, since every event runs it again`, async () => {
        const res = await send(
          server.url,
          transport,
          { query: 'subscription { orderCreated { id customer { orders { id items { sku } } } } }' },
          carol,
        );
        assert.equal(codeOf(res), 'QUERY_TOO_COMPLEX');
        assert.deepEqual(res.body.errors![0]!.extensions!.cost, { complexity: 422, maximum: 200 });
        assert.equal(
          res.body.errors![0]!.message,
          'The subscription could send 422 objects per event; at most 200 are allowed. Ask for smaller pages.',
        );
      });
    }

    test('a subscription sent over plain HTTP is a BAD_REQUEST that names the transports, not an internal error', async () => {
      const query = 'subscription { orderCreated { id } }';
      const json = await server.http.post('/graphql').set('accept', 'application/json').send({ query });
      assert.equal(json.status, 200);
      assert.deepEqual(json.body.data, undefined);
      assert.equal(json.body.errors[0].extensions.code, 'BAD_REQUEST');
      assert.match(
        json.body.errors[0].message,
        /over WebSocket .* at \/graphql and over server-sent events at \/graphql\/stream/,
      );
      const strict = await server.http
        .post('/graphql')
        .set('accept', 'application/graphql-response+json')
        .set('authorization', `Bearer ${carol}`)
        .send({ query });
      assert.equal(strict.status, 400);
      assert.equal(JSON.parse(strict.text).errors[0].extensions.code, 'BAD_REQUEST');
    });

    for (const transport of TRANSPORTS) {
      test(`${transport}: the 143-byte fan-out query is refused with its cost, before it runs`, async () => {
        const before = await admittedQueries();
        const res = await send(server.url, transport, { query: FAN_OUT }, carol);
        // application/json carries a request error in a 200; SSE answers it as the stream's one event.
        assert.equal(res.status, transport === 'ws' ? undefined : 200);
        assert.equal(codeOf(res), 'QUERY_TOO_COMPLEX');
        assert.deepEqual(res.body.errors![0]!.extensions!.cost, { complexity: 102_020_200, maximum: 10_000 });
        assert.equal(res.body.data, undefined);
        // The pipeline admitted no operation to run.
        assert.equal(await admittedQueries(), before);
      });

      test(`${transport}: a normal list query passes and reports its cost`, async () => {
        const res = await send(
          server.url,
          transport,
          { query: '{ recentOrders(first:100){id status customer{id name}} }' },
          carol,
        );
        assert.equal(res.body.errors, undefined);
        assert.ok((res.body.data!.recentOrders as unknown[]).length > 0);
        const cost = res.body.extensions!.cost as Record<string, number>;
        assert.equal(cost.complexity, 200);
        assert.equal(cost.requested, 2);
        assert.ok(cost.remaining! > 0 && cost.remaining! < 5000);
        assert.ok(cost.resetSeconds! > 0 && cost.resetSeconds! <= 3600);
      });

      test(`${transport}: chained fragment spreads are rejected by the depth limit`, async () => {
        const res = await send(server.url, transport, { query: chainedFragments() }, carol);
        assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
        assert.match(res.body.errors![0]!.message, /nested \d+ levels deep; at most 12/);
      });

      test(`${transport}: 1,000 aliases of recentOrders(first:100) are refused`, async () => {
        const res = await send(
          server.url,
          transport,
          { query: aliases(1000, 'recentOrders(first:100) { id }') },
          carol,
        );
        if (transport === 'get' || transport === 'sse') {
          // 30 KB of URL: Node's HTTP parser refuses it before any GraphQL code runs.
          assert.equal(res.status, 431);
          return;
        }
        assert.equal(codeOf(res), 'GRAPHQL_PARSE_FAILED');
        assert.match(res.body.errors![0]!.message, /1000 tokens/);
      });

      test(`${transport}: more aliases than MAX_ALIASES are refused`, async () => {
        const res = await send(server.url, transport, { query: aliases(16, '__typename') });
        assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
        assert.match(res.body.errors![0]!.message, /16 aliases; at most 15/);
      });

      test(`${transport}: more directives than MAX_DIRECTIVES are refused`, async () => {
        const res = await send(server.url, transport, { query: `{ ${'__typename @include(if: true) '.repeat(51)}}` });
        assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
        assert.match(res.body.errors![0]!.message, /51 directives; at most 50/);
      });

      test(`${transport}: a fragment or alias named __schema does not escape the depth limit`, async () => {
        const deep =
          'customer { orders { customer { orders { customer { orders { customer { orders { customer { orders { id } } } } } } } } } }';
        const viaFragment = `{ recentOrders { ...__schema } } fragment __schema on Order { customer { orders { ${deep} } } }`;
        const viaAlias = `{ __schema: recentOrders { customer { orders { ${deep} } } } }`;
        for (const query of [viaFragment, viaAlias]) {
          const res = await send(server.url, transport, { query }, carol);
          assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED', query);
          assert.match(res.body.errors![0]!.message, /nested \d+ levels deep/);
        }
      });

      test(`${transport}: getIntrospectionQuery() in all its variants passes in development`, async () => {
        for (const query of INTROSPECTION_VARIANTS) {
          const res = await send(server.url, transport, { query });
          assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
          assert.ok((res.body.data!.__schema as { types: unknown[] }).types.length > 10);
        }
      });

      test(`${transport}: introspection that nests its lists deeper than the standard query is refused`, async () => {
        const query = '{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }';
        const res = await send(server.url, transport, { query });
        assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
        assert.match(res.body.errors![0]!.message, /Introspection may nest/);
      });

      test(`${transport}: a typo is GRAPHQL_VALIDATION_FAILED, with suggestions in development`, async () => {
        const res = await send(server.url, transport, { query: '{ recentOrders { idd } }' }, carol);
        assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
        assert.match(res.body.errors![0]!.message, /Did you mean "id"\?/);
      });

      test(`${transport}: a bad variable is BAD_USER_INPUT`, async () => {
        const res = await send(
          server.url,
          transport,
          { query: 'query($n: Int) { recentOrders(first: $n) { id } }', variables: { n: 'many' } },
          carol,
        );
        assert.equal(codeOf(res), 'BAD_USER_INPUT');
      });
    }

    for (const transport of ['post', 'ws', 'sse'] as Transport[]) {
      test(`${transport}: 200 aliased createOrder are refused and create no order`, async () => {
        const before = await newestOrder();
        const res = await send(server.url, transport, { query: createOrders(200) }, alice);
        assert.equal(codeOf(res), 'GRAPHQL_PARSE_FAILED');
        assert.equal(await newestOrder(), before);
      });

      test(`${transport}: more mutation fields than MAX_MUTATIONS are refused and create no order`, async () => {
        const before = await newestOrder();
        const res = await send(server.url, transport, { query: createOrders(11) }, alice);
        assert.equal(codeOf(res), 'GRAPHQL_VALIDATION_FAILED');
        assert.match(res.body.errors![0]!.message, /11 mutation fields; at most 10/);
        assert.equal(await newestOrder(), before);
      });
    }
  });
});

// ─── was __tests__/integration/graphql-over-http.test.ts ───
describe('graphql-over-http', () => {
  describe('GraphQL over HTTP', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await sharedServer();
    });

    test('passes every graphql-http server audit (MUST, SHOULD and MAY) with no warning or notice', async () => {
      const audits = serverAudits({ url: `${server.url}/graphql` });
      const results = await Promise.all(audits.map(async (audit) => ({ name: audit.name, result: await audit.fn() })));
      const notOk = results
        .filter(({ result }) => result.status !== 'ok')
        .map(({ name, result }) => `${result.status}: ${name}: ${'reason' in result ? result.reason : ''}`);
      assert.deepEqual(notOk, []);
      assert.ok(results.length >= 60, `expected the full audit list, ran ${results.length}`);
    });

    test('answers a malformed JSON body with a clean GraphQL error and 400, also for application/json', async () => {
      const res = await server.http
        .post('/graphql')
        .set({ 'content-type': 'application/json', accept: 'application/json' })
        .send('{"query": ');
      assert.equal(res.status, 400);
      assert.equal(res.get('content-type'), 'application/json; charset=utf-8');
      assert.deepEqual(res.body, {
        errors: [{ message: 'The request body is not valid JSON.', extensions: { code: 'BAD_REQUEST' } }],
      });
    });

    test('answers a malformed JSON body with 400 for application/graphql-response+json', async () => {
      const res = await server.http
        .post('/graphql')
        .set({ 'content-type': 'application/json', accept: 'application/graphql-response+json' })
        .send('{"query": ');
      assert.equal(res.status, 400);
      assert.equal(res.get('content-type'), 'application/graphql-response+json; charset=utf-8');
      assert.equal((JSON.parse(res.text) as { data?: unknown }).data, undefined);
    });

    test('refuses a mutation over GET with 405 and Allow: POST', async () => {
      const path = `/graphql?query=${encodeURIComponent('mutation { cancelOrder(id: "x") { id } }')}`;
      const res = await server.http.get(path).set({ accept: 'application/json' });
      assert.equal(res.status, 405);
      assert.equal(res.get('allow'), 'POST');
      const body = res.body as { data?: unknown; errors: unknown[] };
      assert.equal(body.data, undefined);
      assert.equal(body.errors.length, 1);
    });

    test('refuses other methods with 405 and Allow', async () => {
      const res = await server.http.put('/graphql').set({ accept: 'application/json' });
      assert.equal(res.status, 405);
      assert.equal(res.get('allow'), 'GET, POST');
    });

    test('refuses a POST without a JSON content type with 415', async () => {
      const res = await server.http
        .post('/graphql')
        .set({ 'content-type': 'text/plain', accept: 'application/json' })
        .send('{ __typename }');
      assert.equal(res.status, 415);
      assert.deepEqual(res.body, {
        errors: [
          {
            message: 'POST requests must send Content-Type: application/json.',
            extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' },
          },
        ],
      });
    });

    test('refuses a body over 100 kB with 413', async () => {
      const res = await server.http
        .post('/graphql')
        .set({ 'content-type': 'application/json', accept: 'application/json' })
        .send(JSON.stringify({ query: `{ __typename }${' '.repeat(110_000)}` }));
      assert.equal(res.status, 413);
      assert.equal(
        (res.body as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code,
        'PAYLOAD_TOO_LARGE',
      );
    });

    test('refuses batched requests with a clear error', async () => {
      const res = await server.http
        .post('/graphql')
        .set({ 'content-type': 'application/json', accept: 'application/json' })
        .send(JSON.stringify([{ query: '{ __typename }' }]));
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, {
        errors: [
          {
            message: 'Batched requests are not supported; send one operation per request.',
            extensions: { code: 'BAD_REQUEST' },
          },
        ],
      });
    });

    test('serves public data over a plain GET with a shared-cache Cache-Control', async () => {
      const res = await server.http.get(`/graphql?query=${encodeURIComponent('{ products { sku priceCents } }')}`);
      assert.equal(res.status, 200);
      assert.equal(res.get('cache-control'), 'max-age=300, public');
      assert.match(res.get('vary') ?? '', /Accept/);
      const body = res.body as { data: { products: { sku: string }[] } };
      assert.equal(body.data.products.length, 20);
    });

    test('marks responses holding private data uncacheable', async () => {
      const token = await server.token('alice');
      const res = await server.http
        .get(`/graphql?query=${encodeURIComponent('{ recentOrders(first: 1) { id } }')}`)
        .set({ authorization: `Bearer ${token}` });
      assert.equal(res.status, 200);
      assert.equal(res.get('cache-control'), 'no-store');
    });

    test('serves automatic persisted queries over GET, as mobile clients send them', async () => {
      const { createHash, randomUUID } = await import('node:crypto');
      // Unique per run: the persisted-query cache may be a Redis shared with earlier runs.
      const query = `query Apq_${randomUUID().replace(/-/g, '')} { products { sku name } }`;
      const sha256Hash = createHash('sha256').update(query).digest('hex');
      const extensions = encodeURIComponent(JSON.stringify({ persistedQuery: { version: 1, sha256Hash } }));
      const getPath = `/graphql?extensions=${extensions}`;
      const headers = { 'apollo-require-preflight': 'true', accept: 'application/json' };

      const miss = await server.http.get(getPath).set(headers);
      assert.equal(miss.status, 200);
      const missBody = miss.body as { errors: { extensions: { code: string } }[] };
      assert.equal(missBody.errors[0]!.extensions.code, 'PERSISTED_QUERY_NOT_FOUND');

      const register = await server.http
        .post('/graphql')
        .set({ 'content-type': 'application/json', accept: 'application/json' })
        .send(JSON.stringify({ query, extensions: { persistedQuery: { version: 1, sha256Hash } } }));
      assert.equal(register.status, 200);

      const hit = await server.http.get(getPath).set(headers);
      assert.equal(hit.status, 200);
      assert.equal(hit.get('cache-control'), 'max-age=300, public');
      const hitBody = hit.body as { data: { products: unknown[] } };
      assert.equal(hitBody.data.products.length, 20);
    });

    test('refuses a cookie-bearing simple GET without a preflight header (CSRF), allows it with one', async () => {
      const path = `/graphql?query=${encodeURIComponent('{ products { sku } }')}`;
      const blocked = await server.http.get(path).set({ cookie: 'orders_session=abc', accept: 'application/json' });
      assert.equal(blocked.status, 400);
      const body = blocked.body as { errors: { extensions: { code: string } }[] };
      assert.equal(body.errors[0]!.extensions.code, 'BAD_REQUEST');

      const allowed = await server.http
        .get(path)
        .set({ cookie: 'sid=abc', accept: 'application/json', 'apollo-require-preflight': 'true' });
      assert.equal(allowed.status, 200);
    });

    test('serves the Sandbox landing page to a browser outside production', async () => {
      const res = await server.http.get('/graphql').set({ accept: 'text/html' });
      assert.equal(res.status, 200);
      assert.match(res.get('content-type') ?? '', /^text\/html/);
      assert.match(res.text, /embeddable-sandbox|Apollo Sandbox/i);
    });
  });
});

// ─── was __tests__/integration/graphql-unreadable-bodies.test.ts ───
describe('graphql-unreadable-bodies', () => {
  /** Sends bytes as they are: superagent would otherwise JSON-serialise a Buffer sent with a JSON content type. */
  const sendRaw = (req: request.Test, body: Buffer) => req.serialize(() => body as unknown as string).send(body);

  describe('a body GraphQL cannot read is a GraphQL 400, not a 500', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await sharedServer();
    });

    for (const path of ['/graphql', '/graphql/stream']) {
      for (const encoding of ['gzip', 'deflate', 'br']) {
        test(`POST ${path} with a corrupt ${encoding} body is 400 BAD_REQUEST`, async () => {
          const req = request(server.url)
            .post(path)
            .set('content-type', 'application/json')
            .set('accept', path.endsWith('stream') ? 'text/event-stream' : 'application/json')
            .set('content-encoding', encoding);
          const res = await sendRaw(req, Buffer.from('this is not compressed'));
          assert.equal(res.status, 400, res.text);
          assert.match(res.headers['content-type'] ?? '', /^application\/json/);
          const body = JSON.parse(res.text) as { errors: { extensions: { code: string } }[] };
          assert.equal(body.errors[0]!.extensions.code, 'BAD_REQUEST');
        });
      }
    }

    for (const path of ['/graphql', '/graphql/stream']) {
      test(`POST ${path} with an empty JSON body is 400 BAD_REQUEST naming the body`, async () => {
        const req = request(server.url)
          .post(path)
          .set('content-type', 'application/json')
          .set('accept', path.endsWith('stream') ? 'text/event-stream' : 'application/json');
        const res = await sendRaw(req, Buffer.alloc(0));
        assert.equal(res.status, 400, res.text);
        const body = JSON.parse(res.text) as { errors: { message: string; extensions: { code: string } }[] };
        assert.deepEqual(
          body.errors.map((e) => [e.message, e.extensions.code]),
          [
            [
              path === '/graphql' ? 'The request body is not valid JSON.' : 'The body is not valid JSON.',
              'BAD_REQUEST',
            ],
          ],
        );
      });

      for (const charset of ['utf-16', 'latin1']) {
        test(`POST ${path} declared as charset=${charset} is 415 UNSUPPORTED_MEDIA_TYPE`, async () => {
          const req = request(server.url)
            .post(path)
            .set('content-type', `application/json; charset=${charset}`)
            .set('accept', path.endsWith('stream') ? 'text/event-stream' : 'application/json');
          const res = await sendRaw(req, Buffer.from('{"query":"{ products { sku } }"}'));
          assert.equal(res.status, 415, res.text);
          const body = JSON.parse(res.text) as { errors: { message: string; extensions: { code: string } }[] };
          assert.deepEqual(
            body.errors.map((e) => [e.message, e.extensions.code]),
            [
              [
                path === '/graphql'
                  ? 'Request bodies must be UTF-8 encoded.'
                  : 'Send the body as UTF-8 JSON, without content encoding or as gzip, deflate or br.',
                'UNSUPPORTED_MEDIA_TYPE',
              ],
            ],
          );
        });
      }
    }

    test('POST /graphql/stream with a body that is not JSON is 400 BAD_REQUEST', async () => {
      const res = await request(server.url)
        .post('/graphql/stream')
        .set('content-type', 'application/json')
        .set('accept', 'text/event-stream')
        .send('{"query": "{ products { sku } }"');
      assert.equal(res.status, 400, res.text);
      const body = JSON.parse(res.text) as { errors: { message: string; extensions: { code: string } }[] };
      assert.equal(body.errors[0]!.extensions.code, 'BAD_REQUEST');
      assert.match(body.errors[0]!.message, /not valid JSON/);
    });

    for (const path of ['/graphql', '/graphql/stream']) {
      test(`POST ${path} in a content coding not read here (zstd) is 415 UNSUPPORTED_MEDIA_TYPE naming the codings read`, async () => {
        const answers = await Promise.all(
          ['zstd', 'compress', 'zstd', 'compress', 'zstd', 'compress', 'zstd', 'compress'].map((coding) =>
            sendRaw(
              request(server.url)
                .post(path)
                .set('content-type', 'application/json')
                .set('accept', path.endsWith('stream') ? 'text/event-stream' : 'application/json')
                .set('content-encoding', coding),
              zstdCompressSync(Buffer.from('{"query":"{ products { sku } }"}')),
            ),
          ),
        );
        for (const res of answers) {
          assert.equal(res.status, 415, res.text);
          assert.equal(res.headers['accept-encoding'], 'gzip, deflate, br');
          assert.deepEqual(JSON.parse(res.text), {
            errors: [
              {
                message:
                  "The body's Content-Encoding is not one this server reads: send it without one, or as gzip, deflate, br.",
                extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' },
              },
            ],
          });
        }
      });
    }

    describe("graphql-sse's own refusals on /graphql/stream carry extensions.code", () => {
      let alice: string;
      beforeAll(async () => {
        alice = await server.token('alice');
      });

      const stream = () => request(server.url);
      type Errors = { errors: { message: string; extensions: { code: string } }[] };
      const errorsOf = (res: request.Response) =>
        (JSON.parse(res.text) as Errors).errors.map((e) => [e.message, e.extensions.code]);

      test('a stream request without a query is 400 BAD_REQUEST "Missing query"', async () => {
        const res = await stream()
          .post('/graphql/stream')
          .set('authorization', `Bearer ${alice}`)
          .set('accept', 'text/event-stream')
          .set('content-type', 'application/json')
          .send('{"variables":{}}');
        assert.equal(res.status, 400, res.text);
        assert.match(res.headers['content-type'] ?? '', /^application\/json; charset=utf-8/);
        assert.deepEqual(errorsOf(res), [['Missing query', 'BAD_REQUEST']]);
      });

      test('an operation or a DELETE for a stream token nobody reserved is 404 NOT_FOUND "Stream not found"', async () => {
        const token = { 'x-graphql-event-stream-token': `t-${Date.now()}`, authorization: `Bearer ${alice}` };
        const add = await stream()
          .post('/graphql/stream')
          .set(token)
          .set('content-type', 'application/json')
          .send('{"query":"subscription { orderChanged { id } }","extensions":{"operationId":"1"}}');
        const remove = await stream().delete('/graphql/stream?operationId=1').set(token);
        for (const res of [add, remove]) {
          assert.equal(res.status, 404, res.text);
          assert.deepEqual(errorsOf(res), [['Stream not found', 'NOT_FOUND']]);
        }
      });

      test('refusals graphql-sse sends without a body get one: 404 without a token, 409 for a token reserved twice, 405', async () => {
        const auth = { authorization: `Bearer ${alice}` };
        const noToken = await stream().post('/graphql/stream').set(auth).set('accept', 'application/json').send('');
        assert.equal(noToken.status, 404, noToken.text);
        assert.deepEqual(errorsOf(noToken)[0]![1], 'NOT_FOUND');
        const token = { ...auth, 'x-graphql-event-stream-token': `r-${Date.now()}` };
        const first = await stream().put('/graphql/stream').set(token);
        assert.equal(first.status, 201, first.text);
        const again = await stream().put('/graphql/stream').set(token);
        assert.equal(again.status, 409, again.text);
        assert.deepEqual(errorsOf(again), [['Stream already registered', 'BAD_REQUEST']]);
        const patch = await stream().patch('/graphql/stream').set(token);
        assert.equal(patch.status, 405, patch.text);
        assert.equal(patch.headers.allow, 'GET, POST, PUT, DELETE');
        assert.deepEqual(errorsOf(patch)[0]![1], 'METHOD_NOT_ALLOWED');
      });
    });
  });
});

// ─── was __tests__/integration/deprecation.test.ts ───
describe('deprecation', () => {
  interface FieldInfo {
    name: string;
    isDeprecated: boolean;
    deprecationReason: string | null;
  }

  describe('deprecation is a promise: the deprecated member works, says so, and its uses are counted', () => {
    let server: TestServer;
    let alice: string;
    beforeAll(async () => {
      server = await sharedServer();
      alice = await server.token('alice');
    });

    /** `graphql_deprecated_uses_total{member=…,client=…}` from /metrics; 0 before the first use. */
    async function uses(member: string, client: string): Promise<number> {
      const res = await request(server.running.metricsUrl!).get('/metrics').expect(200);
      const line = (res.text as string)
        .split('\n')
        .find((l) => l.startsWith(`graphql_deprecated_uses_total{member="${member}",client="${client}"} `));
      return line ? Number(line.split(' ').pop()) : 0;
    }

    test('Order.status still answers, as the lower-case twin of the typed Order.state', async () => {
      const { status, body } = await server.gql('{ recentOrders(first: 5) { status state } }', undefined, {
        token: alice,
      });
      assert.equal(status, 200);
      const orders = (body.data as { recentOrders: { status: string; state: string }[] }).recentOrders;
      assert.equal(orders.length, 5);
      for (const order of orders) assert.equal(order.status, order.state.toLowerCase());
      assert.deepEqual(body.errors, undefined);
    });

    test('introspection reports Order.status as deprecated, with the reason, and hides it unless asked', async () => {
      const { body } = await server.gql(`{
      all: __type(name: "Order") { fields(includeDeprecated: true) { name isDeprecated deprecationReason } }
      current: __type(name: "Order") { fields { name } }
    }`);
      const data = body.data as { all: { fields: FieldInfo[] }; current: { fields: { name: string }[] } };
      assert.deepEqual(
        data.all.fields.find((f) => f.name === 'status'),
        {
          name: 'status',
          isDeprecated: true,
          deprecationReason: 'Use `state`: the same value as a typed enum, so clients can match it exhaustively.',
        },
      );
      assert.deepEqual(
        data.all.fields.find((f) => f.name === 'state'),
        { name: 'state', isDeprecated: false, deprecationReason: null },
      );
      assert.equal(
        data.current.fields.some((f) => f.name === 'status'),
        false,
      );
    });

    test('each operation that selects Order.status counts once for the OAuth client of its token', async () => {
      const before = await uses('Order.status', 'orders-mobile');
      await server.gql('{ a: recentOrders(first: 1) { status } b: recentOrders(first: 2) { status } }', undefined, {
        token: alice,
      });
      await server.gql('{ recentOrders(first: 1) { state } }', undefined, { token: alice });
      assert.equal(await uses('Order.status', 'orders-mobile'), before + 1);
    });
  });
});

// ─── was __tests__/integration/cache-policy.test.ts ───
describe('cache-policy', () => {
  /**
   * Cache-Control comes from each document's @cacheControl hints, worked out once per document (Apollo's per-field
   * plugin is off): the answers must be those the plugin gave, including for documents seen a second time (from the
   * document store), documents whose fields depend on @include/@skip, and responses with errors.
   */
  describe('Cache-Control from the document', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await sharedServer();
    });

    const get = (query: string, variables?: Record<string, unknown>, token?: string) => {
      const vars = variables ? `&variables=${encodeURIComponent(JSON.stringify(variables))}` : '';
      const req = server.http.get(`/graphql?query=${encodeURIComponent(query)}${vars}`);
      return token ? req.set({ authorization: `Bearer ${token}` }) : req;
    };

    test('public data is public the first time and when the document comes from the store', async () => {
      for (let i = 0; i < 2; i++) {
        const res = await get('{ products { sku } product(sku: "KB-001") { name } }');
        assert.equal(res.status, 200);
        assert.equal(res.get('cache-control'), 'max-age=300, public');
        // A shared cache would hand this caller's budget to everyone.
        assert.equal(res.get('ratelimit'), undefined);
        assert.equal(res.get('ratelimit-policy'), undefined);
      }
    });

    test('the viewer or orders make the whole response no-store, and keep the RateLimit headers', async () => {
      const token = await server.token('alice');
      for (const query of [
        '{ products { sku } viewer { subject } }',
        '{ products { sku } recentOrders(first: 1) { id } }',
      ]) {
        const res = await get(query, undefined, token);
        assert.equal(res.status, 200);
        assert.equal((res.body as { errors?: unknown }).errors, undefined);
        assert.equal(res.get('cache-control'), 'no-store');
        assert.ok(res.get('ratelimit'));
      }
      // Anonymous: the viewer field is asked for (and is null), so the response is private all the same.
      assert.equal((await get('{ products { sku } viewer { subject } }')).get('cache-control'), 'no-store');
    });

    test('@include and @skip decide per request, with the variables', async () => {
      const query = 'query ($me: Boolean!) { products { sku } viewer @include(if: $me) { subject } }';
      assert.equal((await get(query, { me: false })).get('cache-control'), 'max-age=300, public');
      assert.equal((await get(query, { me: true })).get('cache-control'), 'no-store');
      assert.equal((await get(query, { me: false })).get('cache-control'), 'max-age=300, public');
      const skipped = 'query ($hide: Boolean = true) { products { sku } viewer @skip(if: $hide) { subject } }';
      assert.equal((await get(skipped)).get('cache-control'), 'max-age=300, public');
      assert.equal((await get(skipped, { hide: false })).get('cache-control'), 'no-store');
    });

    test('errors, meta fields alone and request errors are no-store', async () => {
      const failed = await get('{ products { sku } recentOrders(first: 1) { id } }');
      assert.equal(
        (failed.body as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code,
        'UNAUTHENTICATED',
      );
      assert.equal(failed.get('cache-control'), 'no-store');
      assert.equal((await get('{ __typename }')).get('cache-control'), 'no-store');
      assert.equal((await get('{ products { nope } }')).get('cache-control'), 'no-store');
    });
  });
});
