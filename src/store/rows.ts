import { Ajv } from 'ajv';
import { z } from 'zod';
import { ORDER_STATUSES, type Customer, type Order, type OrderItem, type Product } from '../domain/model.js';

// Rows are validated once where they enter the program, so a schema drift fails loudly here.
const int = z.coerce.number().int();
/** A timestamp as the drivers hand it over (src/store/timestamps.ts): already the API's RFC 3339 form. */
const timestamp = z.string().regex(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
/** A timestamp in stored JSON (outbox payloads, idempotency records), in the same form whatever wrote it. */
const storedTimestamp = z.coerce.date().transform((date) => date.toISOString());

const OrderRow = z.object({
  id: z.string(),
  customer_id: z.string(),
  status: z.enum(ORDER_STATUSES),
  total_cents: int,
  version: int,
  created_at: timestamp,
  updated_at: timestamp,
});

const OrderItemRow = z.object({
  order_id: z.string(),
  line_no: int,
  sku: z.string(),
  qty: int,
  unit_price_cents: int,
});

const CustomerRow = z.object({
  id: z.string(),
  subject: z.string().nullable(),
  name: z.string(),
  email: z.string().nullable(),
});

const ProductRow = z.object({ sku: z.string(), name: z.string(), price_cents: int });

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

const ajv = new Ajv();

/**
 * A row schema's check as ajv compiles it from the schema's JSON Schema (its input form: nothing stripped, nothing
 * coerced). A row that passes is used as it is, which is what zod would have returned for it; any other goes
 * through zod, which coerces what it may and otherwise throws as it always did. zod's parse runs every schema of the
 * program through the same generic code and copies each row, where the compiled check is specific to its schema and
 * copies nothing: on a list it is a visible share of the request (the profiles are in bench/README.md).
 */
function rowReader<T extends z.ZodType>(schema: T): (row: unknown) => z.output<T> {
  const passes = ajv.compile(z.toJSONSchema(schema, { target: 'draft-7', io: 'input' }));
  return (row) => (passes(row) ? (row as z.output<T>) : schema.parse(row));
}

const readOrder = rowReader(OrderRow);
const readOrderItem = rowReader(OrderItemRow);
const readCustomer = rowReader(CustomerRow);
const readProduct = rowReader(ProductRow);

export function toOrder(row: unknown): Order {
  const r = readOrder(row);
  return {
    id: r.id,
    customerId: r.customer_id,
    status: r.status,
    totalCents: r.total_cents,
    version: r.version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export function toOrderItem(row: unknown): OrderItem {
  const r = readOrderItem(row);
  return { orderId: r.order_id, lineNo: r.line_no, sku: r.sku, qty: r.qty, unitPriceCents: r.unit_price_cents };
}

export function toCustomer(row: unknown): Customer {
  const r = readCustomer(row);
  return { id: r.id, subject: r.subject, name: r.name, email: r.email };
}

export function toProduct(row: unknown): Product {
  const r = readProduct(row);
  return { sku: r.sku, name: r.name, priceCents: r.price_cents };
}
