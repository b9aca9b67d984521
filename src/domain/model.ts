/**
 * The domain's nouns. This file imports nothing: every layer may depend on it, and it depends on no layer.
 */

/** Allowed values of Order.status, in lifecycle order. */
export const ORDER_STATUSES = ['pending', 'paid', 'shipped', 'delivered', 'cancelled'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export interface Order {
  readonly id: string;
  readonly customerId: string;
  readonly status: OrderStatus;
  readonly totalCents: number;
  readonly version: number;
  /** RFC 3339 in UTC with milliseconds (`2026-11-22T09:30:00.123Z`), as `Date.toISOString()` writes it. */
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface OrderItem {
  readonly orderId: string;
  readonly lineNo: number;
  readonly sku: string;
  readonly qty: number;
  readonly unitPriceCents: number;
}

/** A line as a client asks for it: the price comes from the catalogue. */
export interface OrderLineInput {
  readonly sku: string;
  readonly qty: number;
}

/** A line checked against the catalogue, at the price it is sold for. */
export interface PricedLine {
  readonly sku: string;
  readonly qty: number;
  readonly unitPriceCents: number;
}

export interface OrderWithItems {
  readonly order: Order;
  readonly items: OrderItem[];
}

export interface Customer {
  readonly id: string;
  /** The OIDC `sub` this customer signs in as; null for customers imported without a login. */
  readonly subject: string | null;
  readonly name: string;
  readonly email: string | null;
}

export interface Product {
  readonly sku: string;
  readonly name: string;
  readonly priceCents: number;
}

export const EVENT_KINDS = ['created', 'updated', 'deleted'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** A committed change to an order, as subscribers receive it. */
export interface OrderEvent {
  /** Decimal string of a bigint: monotonically increasing in commit order. */
  readonly id: string;
  readonly kind: EventKind;
  /** The order as it is after the change (before it, for a deletion). */
  readonly order: Order;
  readonly at: Date;
  /**
   * The W3C Trace Context of the request that wrote it, when tracing was on: its delivery to subscribers, on any
   * replica, is linked to that request's trace. Opaque to the domain.
   */
  readonly trace?: { readonly traceparent: string; readonly tracestate?: string };
}
