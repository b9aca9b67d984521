import type { Order } from './model.js';

/** A strong validator that changes with every write of the order. */
export function orderEtag(order: Pick<Order, 'id' | 'version'>): string {
  return `"${order.id}.v${order.version}"`;
}

/**
 * A client's condition on the current order, checked before a write: `*` (it exists) or the entity tags it
 * may still have. REST sends it as If-Match, GraphQL as an `etag` argument.
 */
export interface Precondition {
  readonly ifMatch: '*' | readonly string[];
}

/** If-Match (RFC 9110 §13.1.1): strong comparison, so a weak tag never matches. */
export function preconditionHolds(
  precondition: Precondition | undefined,
  order: Pick<Order, 'id' | 'version'>,
): boolean {
  if (!precondition || precondition.ifMatch === '*') return true;
  const current = orderEtag(order);
  return precondition.ifMatch.some((tag) => !tag.startsWith('W/') && tag === current);
}
