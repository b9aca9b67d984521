import { z } from 'zod';
import {
  ORDER_STATUSES,
  type Customer,
  type Order,
  type OrderItem,
  type OrderStatus,
  type Product,
} from '../domain/model.js';
import type { ResultColumn, ResultSet } from './db.js';
import { TIMESTAMPTZ } from './timestamps.js';

/**
 * Rows are checked where they enter the program, so that a schema drift fails loudly here: once per result set, from
 * its row description (each column's name and type OID, which PostgreSQL sends with every result, even an empty one),
 * against what the reader expects. What the description proves holds for every row of the result, so rows are then
 * mapped without a check each, except for what it cannot prove:
 * - **the value a text column holds:** an order's `status` is looked up among ORDER_STATUSES on each row (a set
 *   lookup). migrations/core.ts also has a check constraint with the same five, but a row would not tell the two
 *   apart if they ever drifted;
 * - **the form of a timestamp:** the drivers' timestamptz parser (timestamps.ts) gives the API's 24-character form for
 *   every timestamp but ±infinity and years past 9999 or BC, which no constraint rules out: each row's length is checked;
 * - **nullability:** a row description does not say whether a column can be null. The columns read as non-null are
 *   `not null` in migrations/core.ts (all of them but customers' subject and email), which the database-rows block
 *   of __tests__/unit/domain.test.ts checks against the migrated catalogue; the first row's values are also checked,
 *   which proves each parser gives the JavaScript type expected (every row of a column goes through the same parser).
 */
export class RowShapeError extends Error {
  override readonly name = 'RowShapeError';
}

/** A kind of column a reader reads: the type OIDs PostgreSQL may describe it with, and the value the drivers parse. */
interface Kind<V> {
  readonly name: string;
  readonly oids: readonly number[];
  readonly js: 'string' | 'number';
  readonly nullable: boolean;
  /** Only carries V, the value's type, for RowOf. */
  readonly value?: V;
}

/** text and varchar. */
const TEXT: Kind<string> = { name: 'text', oids: [25, 1043], js: 'string', nullable: false };
const NULLABLE_TEXT: Kind<string | null> = { ...TEXT, nullable: true };
/** smallint and integer, which both drivers parse to a number (bigint and numeric they give as text: not these). */
const INTEGER: Kind<number> = { name: 'smallint or integer', oids: [21, 23], js: 'number', nullable: false };
/** A timestamptz, which both drivers give as text in the API's form (timestamps.ts). */
const TIMESTAMP: Kind<string> = { name: 'timestamptz', oids: [TIMESTAMPTZ], js: 'string', nullable: false };

/** The columns a reader reads, in the order its map takes their values. */
type Columns = readonly (readonly [name: string, kind: Kind<unknown>])[];
type ValuesOf<C extends Columns> = {
  readonly [I in keyof C]: C[I] extends readonly [string, Kind<infer V>] ? V : never;
};

export interface RowReader<T> {
  /** The table whose rows these are, and the columns read as non-null (the catalogue test's subjects). */
  readonly table: string;
  readonly nonNull: readonly string[];
  /** Every row of the result, once its description is checked. */
  all(result: ResultSet): T[];
  /** The first row of the result, or null when there is none; the description is checked either way. */
  first(result: ResultSet): T | null;
}

function describe(fields: readonly ResultColumn[]): string {
  return fields.length ? fields.map((f) => `${f.name} (${f.dataTypeID})`).join(', ') : 'no columns';
}

/**
 * A reader of `columns` (in the order `map` takes their values) from results whose rows are arrays (db.ts). A result
 * whose first columns are those, in that order (what the statements select), is mapped as it is; any other order
 * of them is put in that order first.
 */
function rowReader<const C extends Columns, T>(
  what: string,
  table: string,
  columns: C,
  map: (values: ValuesOf<C>) => T,
): RowReader<T> {
  const fail = (problem: string, fields: readonly ResultColumn[]): never => {
    throw new RowShapeError(
      `${what} rows do not have the shape store/rows.ts reads: ${problem} (the result has ${describe(fields)})`,
    );
  };
  /** Checks the description and the first row; answers each column's place in the rows, or null when in order. */
  const check = ({ fields, rows }: ResultSet): number[] | null => {
    const first = rows[0];
    let places: number[] | null = null;
    columns.forEach(([name, kind], i) => {
      const place = fields[i]?.name === name ? i : fields.findIndex((f) => f.name === name);
      const field = fields[place];
      if (!field) return fail(`column "${name}" is missing`, fields);
      if (!kind.oids.includes(field.dataTypeID))
        fail(`column "${name}" has type OID ${field.dataTypeID}, not ${kind.name} (${kind.oids.join(' or ')})`, fields);
      if (place !== i) places ??= columns.map((_, j) => j);
      if (places) places[i] = place;
      if (first === undefined) return;
      const value = first[place];
      if (value === null ? !kind.nullable : typeof value !== kind.js)
        fail(`column "${name}" reads as ${value === null ? 'null' : typeof value}, not ${kind.js}`, fields);
    });
    return places;
  };
  const inOrder = (row: readonly unknown[], places: readonly number[] | null) =>
    (places ? places.map((p) => row[p]) : row) as unknown as ValuesOf<C>;
  return {
    table,
    nonNull: columns.filter(([, kind]) => !kind.nullable).map(([name]) => name),
    all(result) {
      const places = check(result);
      const rows = result.rows;
      const out = new Array<T>(rows.length);
      for (let i = 0; i < rows.length; i++) out[i] = map(inOrder(rows[i]!, places));
      return out;
    },
    first(result) {
      const places = check(result);
      const row = result.rows[0];
      return row ? map(inOrder(row, places)) : null;
    },
  };
}

const STATUSES: ReadonlySet<string> = new Set(ORDER_STATUSES);

function status(value: string): OrderStatus {
  if (!STATUSES.has(value))
    throw new RowShapeError(`order row: status ${JSON.stringify(value)} is not an order status`);
  return value as OrderStatus;
}

function timestamp(value: string): string {
  if (value.length !== 24)
    throw new RowShapeError(`order row: timestamp ${JSON.stringify(value)} is not in the API form`);
  return value;
}

export const orderRows = rowReader(
  'order',
  'orders',
  [
    ['id', TEXT],
    ['customer_id', TEXT],
    ['status', TEXT],
    ['total_cents', INTEGER],
    ['version', INTEGER],
    ['created_at', TIMESTAMP],
    ['updated_at', TIMESTAMP],
  ],
  (r): Order => ({
    id: r[0],
    customerId: r[1],
    status: status(r[2]),
    totalCents: r[3],
    version: r[4],
    createdAt: timestamp(r[5]),
    updatedAt: timestamp(r[6]),
  }),
);

export const orderItemRows = rowReader(
  'order item',
  'order_items',
  [
    ['order_id', TEXT],
    ['line_no', INTEGER],
    ['sku', TEXT],
    ['qty', INTEGER],
    ['unit_price_cents', INTEGER],
  ],
  (r): OrderItem => ({ orderId: r[0], lineNo: r[1], sku: r[2], qty: r[3], unitPriceCents: r[4] }),
);

export const customerRows = rowReader(
  'customer',
  'customers',
  [
    ['id', TEXT],
    ['subject', NULLABLE_TEXT],
    ['name', TEXT],
    ['email', NULLABLE_TEXT],
  ],
  (r): Customer => ({ id: r[0], subject: r[1], name: r[2], email: r[3] }),
);

export const productRows = rowReader(
  'product',
  'products',
  [
    ['sku', TEXT],
    ['name', TEXT],
    ['price_cents', INTEGER],
  ],
  (r): Product => ({ sku: r[0], name: r[1], priceCents: r[2] }),
);

/** A timestamp in stored JSON (outbox payloads, idempotency records), in the same form whatever wrote it. */
const storedTimestamp = z.coerce.date().transform((date) => date.toISOString());

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
