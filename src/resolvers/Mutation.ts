import type { WriteOptions } from '../domain/orderService.js';
import { invalidInput } from '../domain/errors.js';
import type { MutationResolvers, UpdateWebhookEndpointInput } from '../generated/graphql.js';
import { IDEMPOTENCY_KEY_RULE, isValidIdempotencyKey } from '../domain/idempotencyKey.js';

/** The order's `etag` as a precondition: the change applies only to that exact version. */
function ifEtag(etag: string | null | undefined): WriteOptions {
  return etag === null || etag === undefined ? {} : { precondition: { ifMatch: [etag.trim()] } };
}

/**
 * GraphQL has no "absent" apart from leaving a field out: an explicit null means the same as leaving it out, except
 * for `description`, where null removes it (as in a merge patch).
 */
function withoutNulls(input: UpdateWebhookEndpointInput) {
  return {
    ...(input.url != null ? { url: input.url } : {}),
    ...(input.events != null ? { events: input.events } : {}),
    ...(input.description !== undefined ? { description: input.description } : {}),
    ...(input.enabled != null ? { enabled: input.enabled } : {}),
  };
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
  createWebhookEndpoint: (_parent, { input }, { services, principal }) => services.webhooks.create(principal, input),
  updateWebhookEndpoint: (_parent, { id, input, etag }, { services, principal }) =>
    services.webhooks.patch(principal, id, withoutNulls(input), ifEtag(etag).precondition),
  deleteWebhookEndpoint: async (_parent, { id, etag }, { services, principal }) => {
    await services.webhooks.remove(principal, id, ifEtag(etag).precondition);
    return true;
  },
  rotateWebhookEndpointSecret: (_parent, { id, etag }, { services, principal }) =>
    services.webhooks.rotateSecret(principal, id, ifEtag(etag).precondition),
};
