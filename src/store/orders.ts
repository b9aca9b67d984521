import type { Order, OrderItem, OrderStatus } from '../domain/model.js';
import type { Queryable } from './db.js';
import { orderItemRows, orderRows } from './rows.js';

const ORDER_COLUMNS = 'id, customer_id, status, total_cents, version, created_at, updated_at';

export async function findOrder(db: Queryable, id: string): Promise<Order | null> {
  return orderRows.first(await db.queryResult(`select ${ORDER_COLUMNS} from orders where id = $1`, [id]));
}

/** Newest first; `customerId` narrows to one customer. */
export async function listOrders(db: Queryable, opts: { customerId?: string; limit: number }): Promise<Order[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (opts.customerId !== undefined) {
    params.push(opts.customerId);
    where.push(`customer_id = $${params.length}`);
  }
  params.push(opts.limit);
  const result = await db.queryResult(
    `select ${ORDER_COLUMNS} from orders ${where.length ? `where ${where.join(' and ')}` : ''}
     order by created_at desc, id desc limit $${params.length}`,
    params,
  );
  return orderRows.all(result);
}

/** The newest `limit` orders of each customer, in one statement. */
export async function listOrdersOfCustomers(
  db: Queryable,
  customerIds: readonly string[],
  limit: number,
): Promise<Order[]> {
  const result = await db.queryResult(
    `select o.* from unnest($1::text[]) as c(id)
     cross join lateral (
       select ${ORDER_COLUMNS} from orders where customer_id = c.id
       order by created_at desc, id desc limit $2
     ) o`,
    [customerIds, limit],
  );
  return orderRows.all(result);
}

export async function itemsOfOrders(db: Queryable, orderIds: readonly string[]): Promise<OrderItem[]> {
  const result = await db.queryResult(
    `select order_id, line_no, sku, qty, unit_price_cents from order_items
     where order_id = any($1::text[]) order by order_id, line_no`,
    [orderIds],
  );
  return orderItemRows.all(result);
}

export async function insertOrder(
  db: Queryable,
  order: Order,
  lines: readonly { sku: string; qty: number; unitPriceCents: number }[],
): Promise<OrderItem[]> {
  await db.query(`insert into orders (${ORDER_COLUMNS}) values ($1, $2, $3, $4, $5, $6, $7)`, [
    order.id,
    order.customerId,
    order.status,
    order.totalCents,
    order.version,
    order.createdAt,
    order.updatedAt,
  ]);
  await insertItems(db, order.id, lines);
  return lines.map((l, i) => ({ orderId: order.id, lineNo: i + 1, ...l }));
}

async function insertItems(
  db: Queryable,
  orderId: string,
  lines: readonly { sku: string; qty: number; unitPriceCents: number }[],
): Promise<void> {
  await db.query(
    `insert into order_items (order_id, line_no, sku, qty, unit_price_cents)
     select $1, l.n, l.sku, l.qty, l.price
     from unnest($2::text[], $3::int[], $4::int[]) with ordinality as l(sku, qty, price, n)`,
    [orderId, lines.map((l) => l.sku), lines.map((l) => l.qty), lines.map((l) => l.unitPriceCents)],
  );
}

/**
 * Compare-and-set on the version: returns null when the row is gone or has moved on,
 * so concurrent writers with the same precondition get exactly one winner.
 */
export async function updateOrderStatus(
  db: Queryable,
  id: string,
  status: OrderStatus,
  expectedVersion: number,
): Promise<Order | null> {
  const result = await db.queryResult(
    `update orders set status = $2, version = version + 1, updated_at = clock_timestamp()
     where id = $1 and version = $3 returning ${ORDER_COLUMNS}`,
    [id, status, expectedVersion],
  );
  return orderRows.first(result);
}

/** Replaces the lines of a pending order, compare-and-set on the version like updateOrderStatus. */
export async function replaceOrderItems(
  db: Queryable,
  id: string,
  expectedVersion: number,
  lines: readonly { sku: string; qty: number; unitPriceCents: number }[],
  totalCents: number,
): Promise<{ order: Order; items: OrderItem[] } | null> {
  const order = orderRows.first(
    await db.queryResult(
      `update orders set total_cents = $3, version = version + 1, updated_at = clock_timestamp()
       where id = $1 and version = $2 and status = 'pending' returning ${ORDER_COLUMNS}`,
      [id, expectedVersion, totalCents],
    ),
  );
  if (!order) return null;
  await db.query('delete from order_items where order_id = $1', [id]);
  await insertItems(db, id, lines);
  return { order, items: lines.map((l, i) => ({ orderId: id, lineNo: i + 1, ...l })) };
}

/** Deletes the order (and its lines) if it is still at the expected version. */
export async function deleteOrder(db: Queryable, id: string, expectedVersion: number): Promise<boolean> {
  const rows = await db.query('delete from orders where id = $1 and version = $2 returning id', [id, expectedVersion]);
  return rows.length === 1;
}
