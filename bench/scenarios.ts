import type { LoadSpec } from './load.js';

export interface ScenarioContext {
  readonly staffToken: string;
  readonly customerToken: string;
  /** One of the customer's own orders. */
  readonly customerOrderId: string;
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

export function scenarios(ctx: ScenarioContext): Scenario[] {
  const productsQuery = '{products{sku name priceCents}}';
  return [
    recentOrders(20, ctx),
    recentOrders(100, ctx),
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
  return scenarios({ staffToken: '', customerToken: '', customerOrderId: '' }).map(({ name, description }) => ({
    name,
    description,
  }));
}
