import type { Order } from './orders.js';

/** A strong validator that changes with every write of the order. */
export function orderEtag(order: Pick<Order, 'id' | 'version'>): string {
  return `"${order.id}.v${order.version}"`;
}

/** The version an etag of this order names, or undefined when it names no version of it. */
export function versionFromEtag(orderId: string, etag: string): number | undefined {
  const match = /^"([^"]+)\.v(\d{1,9})"$/.exec(etag.trim());
  if (!match || match[1] !== orderId) return undefined;
  return Number(match[2]);
}
