import type { ConnectionArgs } from '../domain/orderListing.js';
import type { OrderSort } from '../domain/orderScan.js';
import type { OrderConnectionResolvers, OrderOrder, QueryOrdersArgs } from '../generated/graphql.js';

export const OrderConnection: OrderConnectionResolvers = {
  edges: (page) => [...page.edges],
  nodes: (page) => [...page.orders],
  pageInfo: (page) => page.pageInfo,
  totalCount: (page) => page.totalCount(),
};

const SORT_FIELDS = { CREATED_AT: 'createdAt', UPDATED_AT: 'updatedAt' } as const;

function sortOf(order: OrderOrder | null | undefined): OrderSort | null {
  if (!order) return null;
  return { field: SORT_FIELDS[order.field], direction: order.direction === 'ASC' ? 'asc' : 'desc' };
}

/** A connection's GraphQL arguments in the domain's terms: enum values become the domain's status and sort names. */
export function connectionArgs(args: QueryOrdersArgs): ConnectionArgs {
  const { filter } = args;
  return {
    first: args.first ?? null,
    after: args.after ?? null,
    last: args.last ?? null,
    before: args.before ?? null,
    orderBy: sortOf(args.orderBy),
    filter: filter
      ? {
          status: filter.status?.map((s) => s.toLowerCase()) ?? null,
          createdAt: filter.createdAt ?? null,
          customerId: filter.customerId ?? null,
          sku: filter.sku ?? null,
        }
      : null,
  };
}
