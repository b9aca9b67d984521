/**
 * What the GraphQL peers (bench/peers/mercurius.ts, yoga.ts, apollo.ts) share: the schema subset the list-of-100,
 * one-order and filtered-page scenarios ask for, the same SQL as the app and the floor run (src/store/orders.ts,
 * customers.ts, orderPages.ts),
 * the floor's pool with its counters for `GET /metrics` (bench/countingPool.ts), and a DataLoader per request for the
 * customers (one statement for the distinct ids of a list, as the app's loaders batch them).
 *
 * No auth: the peers are what a fast GraphQL server costs for the same answer, not what our rules cost.
 */
import DataLoader from 'dataloader';
import { createCountingPool } from '../countingPool.js';
import { filteredPageSql } from '../orderPageSql.js';

export const typeDefs = /* GraphQL */ `
  enum OrderStatus {
    PENDING
    PAID
    SHIPPED
    DELIVERED
    CANCELLED
  }
  type Customer {
    id: ID!
    name: String!
  }
  type Order {
    id: ID!
    status: OrderStatus!
    customer: Customer!
  }
  input DateTimeRange {
    gte: String
  }
  input OrderFilter {
    status: [OrderStatus!]
    createdAt: DateTimeRange
  }
  type OrderConnection {
    nodes: [Order!]!
  }
  type Query {
    recentOrders(first: Int = 20): [Order!]!
    order(id: ID!): Order
    orders(first: Int = 20, filter: OrderFilter): OrderConnection!
  }
`;

const ORDER_COLUMNS = 'id, customer_id, status, total_cents, version, created_at, updated_at';
/** Same clamp as the app's PAGE.max. */
const MAX_FIRST = 100;

interface OrderRow {
  id: string;
  customer_id: string;
  status: string;
}
interface OrderFilterArgs {
  status: string[];
  createdAt: { gte: string };
}
interface CustomerRow {
  id: string;
  name: string;
}

export interface PeerContext {
  readonly customers: DataLoader<string, CustomerRow | null>;
}

export function createPeerData() {
  const db = createCountingPool();
  const { query } = db;
  async function customersById(ids: readonly string[]): Promise<(CustomerRow | null)[]> {
    const rows = await query<CustomerRow>('select id, subject, name, email from customers where id = any($1::text[])', [
      ids,
    ]);
    const byId = new Map(rows.map((c) => [c.id, c]));
    return ids.map((id) => byId.get(id) ?? null);
  }
  const resolvers = {
    Query: {
      recentOrders: (_: unknown, args: { first?: number | null }) =>
        query<OrderRow>(`select ${ORDER_COLUMNS} from orders order by created_at desc, id desc limit $1`, [
          Math.min(args.first ?? 20, MAX_FIRST),
        ]),
      order: async (_: unknown, args: { id: string }) =>
        (await query<OrderRow>(`select ${ORDER_COLUMNS} from orders where id = $1`, [args.id]))[0] ?? null,
      /**
       * The filtered page only (statuses and a lower bound on createdAt, bench/scenarios.ts's orders-filtered-50), in
       * the floor's statement: one scan per status merged in key order, one row more than the page.
       */
      orders: async (_: unknown, args: { first?: number | null; filter: OrderFilterArgs }) => {
        const first = Math.min(args.first ?? 20, MAX_FIRST);
        const rows = await query<OrderRow>(filteredPageSql(first), [
          args.filter.status.map((s) => s.toLowerCase()),
          args.filter.createdAt.gte,
        ]);
        return { nodes: rows.slice(0, first) };
      },
    },
    Order: {
      status: (order: OrderRow) => order.status.toUpperCase(),
      customer: (order: OrderRow, _: unknown, ctx: PeerContext) => ctx.customers.load(order.customer_id),
    },
  };
  return {
    resolvers,
    /** A fresh loader per request, as the app makes them. */
    context: (): PeerContext => ({ customers: new DataLoader(customersById) }),
    countRequest: db.countRequest,
    metricsText: db.metricsText,
    close: db.close,
  };
}
