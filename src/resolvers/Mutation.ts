import { notFound } from '../domain/errors.js';
import { orderEtag } from '../domain/etags.js';
import type { WriteOptions } from '../domain/orderService.js';
import type { MutationResolvers } from '../generated/graphql.js';

/** The order's `etag` as a precondition: the change applies only to that exact version. */
function ifEtag(etag: string | null | undefined): WriteOptions {
  if (etag === null || etag === undefined) return {};
  const expected = etag.trim();
  return { precondition: (order) => orderEtag(order) === expected };
}

export const Mutation: MutationResolvers = {
  createOrder: async (_parent, { input, idempotencyKey }, { services, principal }) => {
    const result = await services.orders.create(
      principal,
      { customerId: input.customerId, items: input.items },
      idempotencyKey === null || idempotencyKey === undefined ? {} : { idempotencyKey },
    );
    // A replay whose order has since been deleted has nothing left to return.
    if (!result.order) throw notFound('Order');
    return result.order;
  },
  updateOrderStatus: (_parent, { id, status, etag }, { services, principal }) =>
    services.orders.changeStatus(principal, id, status, ifEtag(etag)),
  cancelOrder: (_parent, { id, etag }, { services, principal }) => services.orders.cancel(principal, id, ifEtag(etag)),
};
