import { z } from 'zod';
import { isApiTimestamp } from './timestamps.js';
import { ORDER_STATUSES, type Customer, type Order, type OrderItem, type Product } from '../domain/model.js';

// Rows are validated once where they enter the program, so a schema drift fails loudly here. The rows of the hot
// paths (orders, customers, products, order items) are checked by hand, column by column: zod's object parsing cost
// about 3 % of the CPU of a list of 100 orders, for the same checks.
/** A timestamp in stored JSON (outbox payloads, idempotency records), in the same form whatever wrote it. */
const storedTimestamp = z.coerce.date().transform((date) => date.toISOString());
const STATUSES: ReadonlySet<string> = new Set(ORDER_STATUSES);

/** A row that is not what the code expects: a schema drift, reported with the table, column and what was there. */
export class RowShapeError extends Error {
  constructor(table: string, column: string, expected: string, value: unknown) {
    super(`${table}.${column}: expected ${expected}, got ${value === null ? 'null' : typeof value}`);
    this.name = 'RowShapeError';
  }
}

type Row = Record<string, unknown>;

function rowOf(table: string, row: unknown): Row {
  if (row === null || typeof row !== 'object') throw new RowShapeError(table, '*', 'a row', row);
  return row as Row;
}
function text(table: string, r: Row, column: string): string {
  const v = r[column];
  if (typeof v !== 'string') throw new RowShapeError(table, column, 'a string', v);
  return v;
}
function nullableText(table: string, r: Row, column: string): string | null {
  const v = r[column];
  if (v !== null && typeof v !== 'string') throw new RowShapeError(table, column, 'a string or null', v);
  return v;
}
/** An integer column: a number, or the text pg gives a bigint or numeric (z.coerce.number().int() before). */
function integer(table: string, r: Row, column: string): number {
  const v = r[column];
  const n = typeof v === 'number' ? v : typeof v === 'string' || typeof v === 'bigint' ? Number(v) : NaN;
  if (!Number.isInteger(n)) throw new RowShapeError(table, column, 'an integer', v);
  return n;
}
function timestamp(table: string, r: Row, column: string): string {
  const v = r[column];
  // As the drivers hand it over (src/store/timestamps.ts): already the API's RFC 3339 form.
  if (typeof v !== 'string' || !isApiTimestamp(v)) throw new RowShapeError(table, column, 'an RFC 3339 timestamp', v);
  return v;
}
function status(r: Row): (typeof ORDER_STATUSES)[number] {
  const v = r.status;
  if (typeof v !== 'string' || !STATUSES.has(v)) throw new RowShapeError('orders', 'status', 'an order status', v);
  return v as (typeof ORDER_STATUSES)[number];
}

/** An order as the store keeps it in JSON (the outbox payload, an idempotency record): camelCase, ISO dates. */
export const StoredOrder = z.object({
  id: z.string(),
  customerId: z.string(),
  status: z.enum(ORDER_STATUSES),
  totalCents: z.number().int(),
  version: z.number().int(),
  createdAt: storedTimestamp,
  updatedAt: storedTimestamp,
});

export const StoredOrderItem = z.object({
  orderId: z.string(),
  lineNo: z.number().int(),
  sku: z.string(),
  qty: z.number().int(),
  unitPriceCents: z.number().int(),
});

export function toOrder(row: unknown): Order {
  const r = rowOf('orders', row);
  return {
    id: text('orders', r, 'id'),
    customerId: text('orders', r, 'customer_id'),
    status: status(r),
    totalCents: integer('orders', r, 'total_cents'),
    version: integer('orders', r, 'version'),
    createdAt: timestamp('orders', r, 'created_at'),
    updatedAt: timestamp('orders', r, 'updated_at'),
  };
}

export function toOrderItem(row: unknown): OrderItem {
  const r = rowOf('order_items', row);
  return {
    orderId: text('order_items', r, 'order_id'),
    lineNo: integer('order_items', r, 'line_no'),
    sku: text('order_items', r, 'sku'),
    qty: integer('order_items', r, 'qty'),
    unitPriceCents: integer('order_items', r, 'unit_price_cents'),
  };
}

export function toCustomer(row: unknown): Customer {
  const r = rowOf('customers', row);
  return {
    id: text('customers', r, 'id'),
    subject: nullableText('customers', r, 'subject'),
    name: text('customers', r, 'name'),
    email: nullableText('customers', r, 'email'),
  };
}

export function toProduct(row: unknown): Product {
  const r = rowOf('products', row);
  return {
    sku: text('products', r, 'sku'),
    name: text('products', r, 'name'),
    priceCents: integer('products', r, 'price_cents'),
  };
}
