import type { Position } from '../domain/cursors.js';
import type { Order } from '../domain/model.js';
import type { OrderListFilter, OrderScan, PositionedOrder } from '../domain/orderScan.js';
import type { Queryable } from './db.js';
import { orderRows } from './rows.js';

const ORDER_COLUMNS = 'o.id, o.customer_id, o.status, o.total_cents, o.version, o.created_at, o.updated_at';
const SORT_COLUMNS = { createdAt: 'created_at', updatedAt: 'updated_at' } as const;

/**
 * Keyset pages of orders (migrations/orderListing.ts has the indexes that serve each filter and sort). A page is one
 * statement whatever its filter: with statuses, one index scan per status (unnest + lateral, each ordered and
 * limited) merged by a sort of at most 5 × limit rows, since an `= any(…)` scan of a (status, key) index does not
 * come out in key order. The position is the sort key at full precision (microseconds, written by the database), so
 * a cursor never falls between two rows.
 */
class Statement {
  readonly params: unknown[] = [];
  value(v: unknown): string {
    this.params.push(v);
    return `$${this.params.length}`;
  }
}

/**
 * A LIMIT written into the statement rather than bound: a generic plan (a prepared statement's, once PostgreSQL stops
 * planning it per call) assumes a bound LIMIT keeps 10 % of the rows, and would choose a full scan and a sort over the
 * walk of an index that stops after the page. The limit is a small whole number the domain checked.
 */
function literalLimit(n: number): string {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`not a row limit: ${n}`);
  return String(n);
}

/** The conditions every scan of the filter shares; the status is left to the caller (it decides how to scan it). */
function conditions(s: Statement, filter: OrderListFilter): string[] {
  const where: string[] = [];
  if (filter.customerId !== undefined) where.push(`o.customer_id = ${s.value(filter.customerId)}`);
  if (filter.createdGte !== undefined) where.push(`o.created_at >= ${s.value(filter.createdGte)}::timestamptz`);
  if (filter.createdLt !== undefined) where.push(`o.created_at < ${s.value(filter.createdLt)}::timestamptz`);
  return where;
}

/**
 * The sku filter, whose orders no index on `orders` can find: a page reads the SKU's lines from order_items(sku,
 * order_id), at most RARE_SKU_LINES + 1 of them, and then, in the same statement, takes one of two branches (a
 * one-time filter on that count, so only one runs). A rare SKU (an unknown one has no lines) is served from those lines:
 * each order looked up by its key, the page sorted from at most RARE_SKU_LINES rows. A commoner one is found along the
 * sort index, checking each order for the SKU; it is on at least RARE_SKU_LINES lines, so the walk is about
 * limit × orders ÷ RARE_SKU_LINES rows at worst (51 × 200 on 1,000,000 orders), and far fewer for a SKU of any
 * real popularity. Either way the work is bounded, where a walk alone read every order for an unknown SKU.
 */
const RARE_SKU_LINES = 5_000;

/** The CTE of the SKU's lines, and the SKU's parameter. */
function skuLines(s: Statement, sku: string): { cte: string; sku: string } {
  const param = s.value(sku);
  return {
    // In order_id order, so that the plan is a walk of order_items_sku_idx that stops at the limit, whatever the SKU
    // (a generic plan, which cannot tell a rare SKU from a common one, would otherwise scan order_items).
    cte: `with sku_lines as materialized (select order_id from order_items where sku = ${param}
      order by order_id limit ${RARE_SKU_LINES + 1})`,
    sku: param,
  };
}
const RARE = `(select count(*) from sku_lines) <= ${RARE_SKU_LINES}`;
/**
 * Orders of the SKU from `lines` (order ids in order), one key lookup each: lateral, so that the plan cannot turn it
 * into a scan of all orders.
 */
const skuOrders = (lines: string, select: string, where: readonly string[]) =>
  `(select distinct order_id from ${lines}) l cross join lateral (select ${select} from orders o
    where o.id = l.order_id${where.map((w) => ` and ${w}`).join('')}) p`;
const hasSku = (sku: string) => `exists (select 1 from order_items i where i.order_id = o.id and i.sku = ${sku})`;

function scanSql(
  s: Statement,
  scan: OrderScan,
  common: readonly string[],
  part: { descending: boolean; bound?: { position: Position; inclusive: boolean }; limit: string },
): string {
  const column = `o.${SORT_COLUMNS[scan.sort.field]}`;
  const direction = part.descending ? 'desc' : 'asc';
  const where = [...common];
  if (part.bound) {
    const op = (part.descending ? '<' : '>') + (part.bound.inclusive ? '=' : '');
    where.push(
      `(${column}, o.id) ${op} (${s.value(part.bound.position.key)}::timestamptz, ${s.value(part.bound.position.id)})`,
    );
  }
  const key = `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00' as sort_key`;
  const order = `order by ${SORT_COLUMNS[scan.sort.field]} ${direction}, id ${direction}`;
  if (scan.filter.sku !== undefined) {
    const { cte, sku } = skuLines(s, scan.filter.sku);
    const statuses = scan.filter.statuses ? [`o.status = any(${s.value(scan.filter.statuses)}::text[])`] : [];
    const dense = sortedScan(s, scan, [...where, hasSku(sku)], part, key);
    return `${cte} select * from (select p.* from ${skuOrders('sku_lines', `${ORDER_COLUMNS}, ${key}`, [...where, ...statuses])}
        ${order} limit ${part.limit}) rare where ${RARE}
      union all select * from (${dense}) dense where not ${RARE}
      ${order} limit ${part.limit}`;
  }
  return sortedScan(s, scan, where, part, key);
}

/** A page along the sort index: with statuses, one ordered scan per status, merged. */
function sortedScan(
  s: Statement,
  scan: OrderScan,
  where: string[],
  part: { descending: boolean; limit: string },
  key: string,
): string {
  const column = `o.${SORT_COLUMNS[scan.sort.field]}`;
  const direction = part.descending ? 'desc' : 'asc';
  const order = `order by ${SORT_COLUMNS[scan.sort.field]} ${direction}, id ${direction}`;
  if (scan.filter.statuses) {
    where.push('o.status = st.status');
    return `select p.* from unnest(${s.value(scan.filter.statuses)}::text[]) as st(status)
      cross join lateral (select ${ORDER_COLUMNS}, ${key} from orders o where ${where.join(' and ')}
        order by ${column} ${direction}, o.id ${direction} limit ${part.limit}) p
      ${order} limit ${part.limit}`;
  }
  return `select ${ORDER_COLUMNS}, ${key} from orders o ${where.length ? `where ${where.join(' and ')}` : ''}
    order by ${column} ${direction}, o.id ${direction} limit ${part.limit}`;
}

/** A position's key as the statements write sort_key: REST's cursors from before connections hold RFC 3339 (ms). */
function storedKey(key: string): string {
  return key.endsWith('Z') ? `${key.slice(0, 10)} ${key.slice(11, 23)}000+00` : key;
}

/** One scan of `scan`'s list from `bound`, in `descending` order, as a statement with its parameters. */
function statement(
  scan: OrderScan,
  descending: boolean,
  bound: { position: Position; inclusive: boolean } | undefined,
  limit: number,
): { sql: string; params: unknown[] } {
  const s = new Statement();
  const common = conditions(s, scan.filter);
  if (scan.until) {
    const op = descending ? '>' : '<';
    common.push(
      `(o.${SORT_COLUMNS[scan.sort.field]}, o.id) ${op} (${s.value(scan.until.key)}::timestamptz, ${s.value(scan.until.id)})`,
    );
  }
  const sql = scanSql(s, scan, common, { descending, ...(bound ? { bound } : {}), limit: literalLimit(limit) });
  return { sql, params: s.params };
}

/**
 * A page, and with `probe` whether a row lies at or before `after` (pageInfo's other side, exactly). The page is read
 * from `after` inclusive, one row more: when the cursor's own order is still at its position (it is unless it was
 * deleted, or left the filter, or moved under the updatedAt sort), it is that row, and the page costs one index scan
 * like page 1. Otherwise one more statement looks behind the cursor.
 */
export async function scanOrders(
  db: Queryable,
  scan: OrderScan,
): Promise<{ rows: PositionedOrder[]; behind: boolean }> {
  const descending = scan.sort.direction === 'desc';
  const after = scan.after;
  const probing = scan.probe && after !== undefined;
  const page = statement(
    scan,
    descending,
    after ? { position: after, inclusive: probing } : undefined,
    scan.limit + (probing ? 1 : 0),
  );
  const result = await db.queryResult(page.sql, page.params);
  const orders = orderRows.all(result);
  // The statement selects it after the order's columns (see `statement`).
  const keyAt = result.fields.findIndex((f) => f.name === 'sort_key');
  let rows = orders.map((order, i) => ({ order, position: { key: result.rows[i]![keyAt] as string, id: order.id } }));
  let behind = false;
  if (probing) {
    const first = rows[0];
    if (first && first.order.id === after.id && storedKey(after.key) === first.position.key) {
      behind = true;
      rows = rows.slice(1);
    } else {
      rows = rows.slice(0, scan.limit);
      const probe = statement(scan, !descending, { position: after, inclusive: true }, 1);
      behind = (await db.query(probe.sql, probe.params)).length > 0;
    }
  }
  return { rows, behind };
}

export async function countOrders(db: Queryable, filter: OrderListFilter, bound: number): Promise<number> {
  const s = new Statement();
  const where = conditions(s, filter);
  if (filter.statuses) where.push(`o.status = any(${s.value(filter.statuses)}::text[])`);
  const limit = literalLimit(bound);
  const counted = (from: string, on: readonly string[]) =>
    `(select count(*)::int from (select 1 from ${from} ${on.length ? `where ${on.join(' and ')}` : ''}
      limit ${limit}) counted)`;
  let sql = `select ${counted('orders o', where)} as n`;
  if (filter.sku !== undefined) {
    // The SKU's lines in order_id order, each order looked up: stops at `bound` matches, whether the SKU is rare or not.
    const lines = `(select order_id from order_items where sku = ${s.value(filter.sku)} order by order_id) lines`;
    sql = `select ${counted(skuOrders(lines, '1', where), [])} as n`;
  }
  const rows = await db.query<{ n: number }>(sql, s.params);
  return Number(rows[0]?.n ?? 0);
}

export async function ordersByIds(db: Queryable, ids: readonly string[]): Promise<Order[]> {
  return orderRows.all(
    await db.queryResult(`select ${ORDER_COLUMNS} from orders o where o.id = any($1::text[])`, [ids]),
  );
}
