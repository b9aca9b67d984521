import type { WriteOptions } from '../domain/orderService.js';
import { invalidInput } from '../domain/errors.js';
import type { MutationResolvers } from '../generated/graphql.js';
import { IDEMPOTENCY_KEY_RULE, isValidIdempotencyKey } from '../domain/idempotencyKey.js';

/** The order's `etag` as a precondition: the change applies only to that exact version. */
function ifEtag(etag: string | null | undefined): WriteOptions {
  return etag === null || etag === undefined ? {} : { precondition: { ifMatch: [etag.trim()] } };
}

export const Mutation: MutationResolvers = {
  createOrder: async (_parent, { input, idempotencyKey }, { services, principal }) => {
    if (idempotencyKey !== null && idempotencyKey !== undefined && !isValidIdempotencyKey(idempotencyKey)) {
      throw invalidInput([{ pointer: '/idempotencyKey', reason: `must be ${IDEMPOTENCY_KEY_RULE}` }]);
    }
    const result = await services.orders.create(
      principal,
      { customerId: input.customerId, items: input.items },
      idempotencyKey === null || idempotencyKey === undefined ? {} : { idempotencyKey },
    );
    return result.order;
  },
  updateOrderStatus: (_parent, { id, status, etag }, { services, principal }) =>
    services.orders.changeStatus(principal, id, status, ifEtag(etag)),
  cancelOrder: (_parent, { id, etag }, { services, principal }) => services.orders.cancel(principal, id, ifEtag(etag)),
};
