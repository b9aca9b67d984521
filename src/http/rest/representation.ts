import type { OrderCursor } from '../../store/orders.js';
import type { Order, OrderItem } from '../../domain/orders.js';

/** The REST representation of an order: snake_case, money in integer cents. */
export function orderJson(order: Order, items: readonly OrderItem[]) {
  return {
    id: order.id,
    customer_id: order.customerId,
    status: order.status,
    items: items.map((i) => ({
      sku: i.sku,
      qty: i.qty,
      unit_price_cents: i.unitPriceCents,
      line_total_cents: i.qty * i.unitPriceCents,
    })),
    total_cents: order.totalCents,
    created_at: order.createdAt.toISOString(),
    updated_at: order.updatedAt.toISOString(),
  };
}

/** Cursors are opaque to clients: base64url of the last row's position in newest-first order. */
export function encodeCursor(order: Order): string {
  return Buffer.from(JSON.stringify([order.createdAt.toISOString(), order.id])).toString('base64url');
}

export function decodeCursor(cursor: string): OrderCursor | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(value) || value.length !== 2) return null;
    const [at, id] = value as unknown[];
    if (typeof at !== 'string' || typeof id !== 'string') return null;
    const createdAt = new Date(at);
    return Number.isNaN(createdAt.getTime()) ? null : { createdAt, id };
  } catch {
    return null;
  }
}
