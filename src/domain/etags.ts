import type { Order } from './model.js';

/** A strong validator that changes with every write of a versioned resource (an order, a directory user or group). */
export function entityTag(resource: { readonly id: string; readonly version: number }): string {
  return `"${resource.id}.v${resource.version}"`;
}

/** A strong validator that changes with every write of the order. */
export function orderEtag(order: Pick<Order, 'id' | 'version'>): string {
  return entityTag(order);
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
  return tagMatches(precondition, orderEtag(order));
}

/** If-Match against a current entity tag: `*` or a listed tag equal to it, compared strongly. */
export function tagMatches(precondition: Precondition | undefined, current: string): boolean {
  if (!precondition || precondition.ifMatch === '*') return true;
  return precondition.ifMatch.some((tag) => !tag.startsWith('W/') && tag === current);
}
