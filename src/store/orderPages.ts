import type { Position } from '../domain/cursors.js';
import type { Order } from '../domain/model.js';
import type { OrderListFilter, OrderScan, PositionedOrder } from '../domain/orderScan.js';
import type { Queryable } from './db.js';
import { toOrder } from './rows.js';

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

/** The conditions every scan of the filter shares; the status is left to the caller (it decides how to scan it). */
function conditions(s: Statement, filter: OrderListFilter): string[] {
  const where: string[] = [];
  if (filter.customerId !== undefined) where.push(`o.customer_id = ${s.value(filter.customerId)}`);
  if (filter.createdGte !== undefined) where.push(`o.created_at >= ${s.value(filter.createdGte)}::timestamptz`);
  if (filter.createdLt !== undefined) where.push(`o.created_at < ${s.value(filter.createdLt)}::timestamptz`);
  if (filter.sku !== undefined) {
    where.push(`exists (select 1 from order_items i where i.order_id = o.id and i.sku = ${s.value(filter.sku)})`);
  }
  return where;
}

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

export async function scanOrders(
  db: Queryable,
  scan: OrderScan,
): Promise<{ rows: PositionedOrder[]; behind: boolean }> {
  const s = new Statement();
  const descending = scan.sort.direction === 'desc';
  const common = conditions(s, scan.filter);
  if (scan.until) {
    const op = descending ? '>' : '<';
    common.push(
      `(o.${SORT_COLUMNS[scan.sort.field]}, o.id) ${op} (${s.value(scan.until.key)}::timestamptz, ${s.value(scan.until.id)})`,
    );
  }
  const page = scanSql(s, scan, common, {
    descending,
    ...(scan.after ? { bound: { position: scan.after, inclusive: false } } : {}),
    limit: s.value(scan.limit),
  });
  // The other side of `after`: one row at or before it, read backwards from it in the same statement.
  const sql =
    scan.probe && scan.after
      ? `select *, false as probe from (${page}) page union all select *, true from (${scanSql(s, scan, common, {
          descending: !descending,
          bound: { position: scan.after, inclusive: true },
          limit: '1',
        })}) probe order by probe, ${SORT_COLUMNS[scan.sort.field]} ${descending ? 'desc' : 'asc'}, id ${
          descending ? 'desc' : 'asc'
        }`
      : `select *, false as probe from (${page}) page`;
  const rows = await db.query<Record<string, unknown> & { sort_key: string; probe: boolean }>(sql, s.params);
  const found = rows.filter((r) => !r.probe);
  return {
    rows: found.map((r) => ({ order: toOrder(r), position: { key: r.sort_key, id: String(r.id) } })),
    behind: rows.length > found.length,
  };
}

export async function countOrders(db: Queryable, filter: OrderListFilter, bound: number): Promise<number> {
  const s = new Statement();
  const where = conditions(s, filter);
  if (filter.statuses) where.push(`o.status = any(${s.value(filter.statuses)}::text[])`);
  const rows = await db.query<{ n: number }>(
    `select count(*)::int as n from (select 1 from orders o ${where.length ? `where ${where.join(' and ')}` : ''}
     limit ${s.value(bound)}) counted`,
    s.params,
  );
  return Number(rows[0]?.n ?? 0);
}

export async function ordersByIds(db: Queryable, ids: readonly string[]): Promise<Order[]> {
  const rows = await db.query(`select ${ORDER_COLUMNS} from orders o where o.id = any($1::text[])`, [ids]);
  return rows.map(toOrder);
}
