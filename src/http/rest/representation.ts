import type { Order, OrderCursor, OrderItem } from '../../domain/model.js';
import type { WebhookCursor, WebhookDelivery, WebhookEndpoint } from '../../domain/webhooks.js';
import type { OrderRepresentation, WebhookDeliveryRepresentation, WebhookEndpointRepresentation } from './contract.js';

/** The REST representation of an order: snake_case, money in integer cents. */
export function orderJson(order: Order, items: readonly OrderItem[]): OrderRepresentation {
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
    created_at: order.createdAt,
    updated_at: order.updatedAt,
  };
}

/**
 * Cursors are opaque to clients: base64url of the last row's position in newest-first order. One form for orders,
 * webhook endpoints and deliveries.
 */
export function encodeCursor(item: { readonly createdAt: string; readonly id: string }): string {
  return Buffer.from(JSON.stringify([item.createdAt, item.id])).toString('base64url');
}

/** Longer than any cursor encodeCursor makes (about 90 characters). */
const MAX_CURSOR_LENGTH = 200;
const ORDER_ID = /^ord_[0-9a-hjkmnp-tv-z]{26}$/;
/** Nothing this API stored predates the epoch; the bound keeps BC and far-future dates away from SQL. */
const EPOCH_YEAR = 1970;

/**
 * Accepts only what encodeCursor could have made, with an id of `idPattern`: a tampered cursor (a BC date, a NUL
 * byte, any other id) is refused here rather than failing in the database.
 */
function decodePosition(cursor: string, idPattern: RegExp): { at: string; createdAt: Date; id: string } | null {
  if (cursor.length > MAX_CURSOR_LENGTH || !/^[\w-]+$/.test(cursor)) return null;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (!Array.isArray(value) || value.length !== 2) return null;
  const [at, id] = value as unknown[];
  if (typeof at !== 'string' || typeof id !== 'string' || !idPattern.test(id)) return null;
  const createdAt = new Date(at);
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== at) return null;
  return createdAt.getUTCFullYear() >= EPOCH_YEAR && createdAt.getUTCFullYear() <= 9999 ? { at, createdAt, id } : null;
}

export function decodeCursor(cursor: string): OrderCursor | null {
  const position = decodePosition(cursor, ORDER_ID);
  return position && { createdAt: position.createdAt, id: position.id };
}

/** The REST representation of a webhook endpoint (its secret only where one was just made). */
export function webhookEndpointJson(endpoint: WebhookEndpoint): WebhookEndpointRepresentation {
  return {
    id: endpoint.id,
    url: endpoint.url,
    events: [...endpoint.events],
    description: endpoint.description,
    enabled: endpoint.enabled,
    disabled_reason: endpoint.disabledReason,
    created_at: endpoint.createdAt,
    updated_at: endpoint.updatedAt,
  };
}

export function webhookDeliveryJson(delivery: WebhookDelivery): WebhookDeliveryRepresentation {
  return {
    id: delivery.id,
    type: delivery.type,
    status: delivery.status,
    created_at: delivery.createdAt,
    next_attempt_at: delivery.nextAttemptAt,
    attempts: delivery.attempts.map((a) => ({
      at: a.at,
      duration_ms: a.durationMs,
      status_code: a.statusCode,
      error: a.error,
    })),
  };
}

export function decodeWebhookCursor(cursor: string, idPattern: RegExp): WebhookCursor | null {
  const position = decodePosition(cursor, idPattern);
  return position && { createdAt: position.at, id: position.id };
}
