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
 * A client's conditions on the current order, checked before a write. REST sends them as If-Match and If-None-Match,
 * GraphQL as an `etag` argument (If-Match).
 */
export interface Precondition {
  /** If-Match (RFC 9110 §13.1.1): `*` (it exists) or the entity tags it may still have, compared strongly. */
  readonly ifMatch?: '*' | readonly string[];
  /**
   * If-None-Match (RFC 9110 §13.1.2): `*` (it must not exist yet) or entity tags it must no longer have, compared
   * weakly. On a write to an existing resource, `*` always fails.
   */
  readonly ifNoneMatch?: '*' | readonly string[];
}

/** Which condition fails for the current version, in the order RFC 9110 §13.2.2 evaluates them; null when all hold. */
export type FailedCondition = 'if-match' | 'if-none-match';

const opaque = (tag: string) => (tag.startsWith('W/') ? tag.slice(2) : tag);

/** The conditions against the current entity tag of a resource that exists. */
export function failedCondition(precondition: Precondition | undefined, current: string): FailedCondition | null {
  const { ifMatch, ifNoneMatch } = precondition ?? {};
  if (ifMatch !== undefined && ifMatch !== '*' && !ifMatch.some((tag) => !tag.startsWith('W/') && tag === current)) {
    return 'if-match';
  }
  if (ifNoneMatch === '*' || ifNoneMatch?.some((tag) => opaque(tag) === opaque(current))) return 'if-none-match';
  return null;
}

/** The conditions against a current entity tag: true when every one holds. */
export function tagMatches(precondition: Precondition | undefined, current: string): boolean {
  return failedCondition(precondition, current) === null;
}
