import type { LoadSpec } from './load.js';

export interface ScenarioContext {
  readonly staffToken: string;
  readonly customerToken: string;
  /** One of the customer's own orders. */
  readonly customerOrderId: string;
  /** The `orders` connection's cursor at depth 10,000 pages of 50 (or half-way down a smaller table). */
  readonly deepCursor: string;
  /** Where the status + createdAt filter's range starts: 30 days before the bench's data was grown. */
  readonly since: string;
}

export interface Scenario {
  readonly name: string;
  readonly description: string;
  /** The same request goes to the app and to the floor (the floor ignores the token). */
  request(baseUrl: string): LoadSpec;
  /** What the response is about, for checking that app and floor did the same work. */
  ids(body: unknown): string[];
  /** Extra check of the answer, e.g. the expected number of orders. */
  expect(ids: string[]): string | null;
}

const SELECTION = '{ id status customer { id name } }';

function post(baseUrl: string, token: string, payload: object): LoadSpec {
  return {
    url: `${baseUrl}/graphql`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(payload),
  };
}

type Data = { data?: Record<string, unknown> | null };

function recentOrders(first: number, ctx: ScenarioContext): Scenario {
  return {
    name: `recentOrders-${first}`,
    description: `POST recentOrders(first: ${first}) ${SELECTION} as staff (carol)`,
    request: (baseUrl) => post(baseUrl, ctx.staffToken, { query: `{ recentOrders(first: ${first}) ${SELECTION} }` }),
    ids: (body) => ((body as Data).data?.recentOrders as { id: string }[] | undefined)?.map((o) => o.id) ?? [],
    expect: (ids) => (ids.length === first ? null : `expected ${first} orders, got ${ids.length}`),
  };
}

/** A page of 50 of the `orders` connection as staff: `args` are its arguments beside `first: 50`. */
function ordersPage(name: string, args: string, ctx: ScenarioContext, variables?: Record<string, unknown>): Scenario {
  const declared = variables ? '($after: String)' : '';
  return {
    name,
    description: `POST orders(first: 50${args}) { nodes ${SELECTION} } as staff (carol)`,
    request: (baseUrl) =>
      post(baseUrl, ctx.staffToken, {
        query: `query${declared} { orders(first: 50${args}) { nodes ${SELECTION} } }`,
        ...(variables ? { variables } : {}),
      }),
    ids: (body) =>
      ((body as Data).data?.orders as { nodes: { id: string }[] } | undefined)?.nodes.map((o) => o.id) ?? [],
    expect: (ids) => (ids.length === 50 ? null : `expected 50 orders, got ${ids.length}`),
  };
}

export function scenarios(ctx: ScenarioContext): Scenario[] {
  const productsQuery = '{products{sku name priceCents}}';
  return [
    recentOrders(20, ctx),
    recentOrders(100, ctx),
    ordersPage('orders-filtered-50', `, filter: {status: [PAID, SHIPPED], createdAt: {gte: "${ctx.since}"}}`, ctx),
    ordersPage('orders-page-1', '', ctx),
    ordersPage('orders-page-10000', ', after: $after', ctx, { after: ctx.deepCursor }),
    {
      name: 'order-by-id',
      description: `POST order(id) ${SELECTION} as the owning customer (alice)`,
      request: (baseUrl) =>
        post(baseUrl, ctx.customerToken, {
          query: `query Order($id: ID!) { order(id: $id) ${SELECTION} }`,
          variables: { id: ctx.customerOrderId },
        }),
      ids: (body) => {
        const order = (body as Data).data?.order as { id: string } | null | undefined;
        return order ? [order.id] : [];
      },
      expect: (ids) => (ids[0] === ctx.customerOrderId ? null : `expected order ${ctx.customerOrderId}, got ${ids}`),
    },
    {
      name: 'products-get',
      description: `GET /graphql?query=${productsQuery} anonymous (public, cacheable)`,
      request: (baseUrl) => ({
        url: `${baseUrl}/graphql?query=${encodeURIComponent(productsQuery)}`,
        method: 'GET',
        headers: {},
      }),
      ids: (body) => ((body as Data).data?.products as { sku: string }[] | undefined)?.map((p) => p.sku) ?? [],
      expect: (ids) => (ids.length > 0 ? null : 'expected products'),
    },
  ];
}

/** Every scenario's name and what it sends, for --help and --only (no tokens needed to describe them). */
export function scenarioCatalogue(): { name: string; description: string }[] {
  return scenarios({ staffToken: '', customerToken: '', customerOrderId: '', deepCursor: '', since: '' }).map(
    ({ name, description }) => ({
      name,
      description,
    }),
  );
}
