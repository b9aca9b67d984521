import { decodePosition } from '../../domain/cursors.js';
import type { Order, OrderItem } from '../../domain/model.js';
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
  return position && { createdAt: position.key, id: position.id };
}

export { encodeCursor } from '../../domain/cursors.js';
