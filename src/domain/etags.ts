import type { Order } from './orders.js';

/** A strong validator that changes with every write of the order. */
export function orderEtag(order: Pick<Order, 'id' | 'version'>): string {
  return `"${order.id}.v${order.version}"`;
}
