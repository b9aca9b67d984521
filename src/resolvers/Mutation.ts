import { DomainError } from '../domain/errors.js';
import { versionFromEtag } from '../domain/etags.js';
import type { MutationResolvers } from '../generated/graphql.js';

/** An etag that names no version of this order can never match, so it fails the precondition. */
function expectedVersion(id: string, etag: string | null | undefined): { expectedVersion?: number } {
  if (etag === null || etag === undefined) return {};
  const version = versionFromEtag(id, etag);
  if (version === undefined) {
    throw new DomainError('PRECONDITION_FAILED', 'The etag does not match the current version of the order.');
  }
  return { expectedVersion: version };
}

export const Mutation: MutationResolvers = {
  createOrder: async (_parent, { input }, { services, principal }) =>
    (await services.orders.create(principal, { customerId: input.customerId, items: input.items })).order,
  updateOrderStatus: (_parent, { id, status, etag }, { services, principal }) =>
    services.orders.changeStatus(principal, id, status, expectedVersion(id, etag)),
  cancelOrder: (_parent, { id, etag }, { services, principal }) =>
    services.orders.cancel(principal, id, expectedVersion(id, etag)),
};
