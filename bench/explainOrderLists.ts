import { randomBytes } from 'node:crypto';
import type { OrderListFilter, OrderScan } from '../src/domain/orderScan.js';
import { migrate } from '../src/store/migrations.js';
import type { Queryable } from '../src/store/db.js';
import { openDatabase } from '../src/store/open.js';
import { countOrders, scanOrders } from '../src/store/orderPages.js';
import { seed } from '../src/store/seed.js';
import { connect, dropSchema, growOrders } from './data.js';

/**
 * The plans of the order lists' SQL (store/orderPages.ts), as docs/orders-listing.md shows them: a fresh schema grown
 * to ORDERS orders, then EXPLAIN (ANALYZE, BUFFERS) of the very statements a page runs, for each filter and sort.
 * `tsx bench/explainOrderLists.ts [orders] [schema]` (DATABASE_URL, default the local server); a fresh schema is
 * dropped after, a named one (such as a kept bench schema: npm run bench -- --schema bench_o1m) is grown if need be
 * and kept. The sku cases are also shown as generic plans (plan_cache_mode = force_generic_plan), which is what a
 * prepared statement runs after five executions: the plan must stay bounded without knowing the SKU.
 */
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ORDERS = Number(process.argv[2] ?? 200_000);
const kept = process.argv[3];
const schema = kept ?? `explain_${randomBytes(4).toString('hex')}`;
/** A product on 40 orders: the rare SKU of the sku cases. */
const RARE_SKU = 'EXPLAIN-RARE';

const db = await openDatabase({ kind: 'postgres', url, schema });
const client = await connect(url, schema);
try {
  await migrate(db);
  await seed(db);
  await growOrders(client, ORDERS);
  if (!(await client.query('select 1 from products where sku = $1', [RARE_SKU])).rowCount) {
    await client.query(`insert into products (sku, name, price_cents) values ($1, 'Rare cable', 100)`, [RARE_SKU]);
    await client.query(
      `with picked as (select id from orders order by id limit 40 offset 1000),
        lines as (insert into order_items (order_id, line_no, sku, qty, unit_price_cents)
          select id, 9, $1, 1, 100 from picked returning order_id)
       update orders set total_cents = total_cents + 100 where id in (select order_id from lines)`,
      [RARE_SKU],
    );
    await client.query('vacuum (analyze) order_items');
  }
  const customer = (await client.query<{ id: string }>(`select id from customers where subject = 'alice'`)).rows[0]!.id;
  const deep = (
    await client.query<{ id: string; key: string }>(
      `select id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00' as key from orders
       order by created_at desc, id desc offset $1 limit 1`,
      [Math.floor(ORDERS / 2)],
    )
  ).rows[0]!;
  const monthAgo = new Date(Date.now() - 30 * 86_400_000).toISOString();
  const cases: [string, OrderScan][] = [
    [
      'default (newest created first), page 1',
      { filter: {}, sort: { field: 'createdAt', direction: 'desc' }, limit: 51, probe: false },
    ],
    [
      `default, half-way down (${Math.floor(ORDERS / 2)} orders in), read from the cursor's own order`,
      {
        filter: {},
        sort: { field: 'createdAt', direction: 'desc' },
        after: { key: deep.key, id: deep.id },
        limit: 51,
        probe: true,
      },
    ],
    [
      'status paid,shipped + created in the last 30 days, newest first',
      {
        filter: { statuses: ['paid', 'shipped'], createdGte: monthAgo },
        sort: { field: 'createdAt', direction: 'desc' },
        limit: 51,
        probe: false,
      },
    ],
    [
      'status cancelled, updated_at ascending',
      { filter: { statuses: ['cancelled'] }, sort: { field: 'updatedAt', direction: 'asc' }, limit: 51, probe: false },
    ],
    [
      "one customer's orders, updated_at descending",
      { filter: { customerId: customer }, sort: { field: 'updatedAt', direction: 'desc' }, limit: 51, probe: false },
    ],
    [
      "one customer's delivered orders, newest first",
      {
        filter: { customerId: customer, statuses: ['delivered'] },
        sort: { field: 'createdAt', direction: 'desc' },
        limit: 51,
        probe: false,
      },
    ],
  ];
  const skuCases: [string, OrderScan][] = [
    [
      'sku KB-001 (common: on about 1 order in 8), newest first',
      { filter: { sku: 'KB-001' }, sort: { field: 'createdAt', direction: 'desc' }, limit: 51, probe: false },
    ],
    [
      "sku KB-001, half-way down, read from the cursor's own order",
      {
        filter: { sku: 'KB-001' },
        sort: { field: 'createdAt', direction: 'desc' },
        after: { key: deep.key, id: deep.id },
        limit: 51,
        probe: true,
      },
    ],
    [
      `sku ${RARE_SKU} (rare: 40 orders), status paid,shipped,delivered, updated_at descending`,
      {
        filter: { sku: RARE_SKU, statuses: ['delivered', 'paid', 'shipped'] },
        sort: { field: 'updatedAt', direction: 'desc' },
        limit: 51,
        probe: false,
      },
    ],
    [
      "an unknown sku in one customer's orders, newest first",
      {
        filter: { sku: 'NO-SUCH-SKU', customerId: customer },
        sort: { field: 'createdAt', direction: 'desc' },
        limit: 51,
        probe: false,
      },
    ],
    [
      'an unknown sku, newest first',
      { filter: { sku: 'NO-SUCH-SKU' }, sort: { field: 'createdAt', direction: 'desc' }, limit: 51, probe: false },
    ],
  ];
  /** The statement `run` sends, without running it. */
  const capture = async (run: (q: Queryable) => Promise<unknown>) => {
    // The first statement: a page from a cursor is one statement; the store looks behind the cursor with a second
    // only when the cursor's order has left the list, which the empty answers here would make it think. (The empty
    // answer has no row description either: the store's check of it throws, and is ignored here.)
    let captured: { sql: string; params: readonly unknown[] } | undefined;
    const q: Queryable = {
      query: async (sql, params = []) => {
        captured ??= { sql, params };
        return [];
      },
      queryResult: async (sql, params = []) => {
        captured ??= { sql, params };
        return { rows: [], fields: [] };
      },
    };
    await run(q).catch(() => undefined);
    return captured!;
  };
  const print = (title: string, rows: Record<string, string>[]) =>
    console.log(`### ${title}\n\n\`\`\`\n${rows.map((r) => r['QUERY PLAN']).join('\n')}\n\`\`\`\n`);
  const OPTIONS = 'analyze, buffers, costs off, timing off, summary off';
  const explain = async (title: string, run: Parameters<typeof capture>[0]) => {
    const { sql, params } = await capture(run);
    print(title, (await client.query(`explain (${OPTIONS}) ${sql}`, [...params])).rows);
  };
  /** As a prepared statement's generic plan: planned once for any parameters. */
  const explainGeneric = async (title: string, run: Parameters<typeof capture>[0]) => {
    const { sql, params } = await capture(run);
    const literal = (v: unknown) =>
      Array.isArray(v) ? client.escapeLiteral(`{${v.join(',')}}`) : client.escapeLiteral(String(v));
    await client.query('set plan_cache_mode = force_generic_plan');
    await client.query(`prepare generic as ${sql}`);
    try {
      const plan = await client.query(`explain (${OPTIONS}) execute generic(${params.map(literal).join(', ')})`);
      print(`${title} (generic plan)`, plan.rows);
    } finally {
      await client.query('deallocate generic');
      await client.query('reset plan_cache_mode');
    }
  };
  for (const [title, scan] of cases) await explain(title, (q) => scanOrders(q, scan));
  for (const [title, scan] of skuCases) await explain(title, (q) => scanOrders(q, scan));
  for (const [title, scan] of [skuCases[0]!, skuCases.at(-1)!]) await explainGeneric(title, (q) => scanOrders(q, scan));
  const filter: OrderListFilter = { statuses: ['paid', 'shipped'], createdGte: monthAgo };
  await explain('totalCount of status paid,shipped + the last 30 days (bounded at 10,000)', (q) =>
    countOrders(q, filter, 10_001),
  );
  await explain('totalCount of an unknown sku', (q) => countOrders(q, { sku: 'NO-SUCH-SKU' }, 10_001));
  await explain('totalCount of sku KB-001 (bounded at 10,000)', (q) => countOrders(q, { sku: 'KB-001' }, 10_001));
  await explainGeneric('totalCount of an unknown sku', (q) => countOrders(q, { sku: 'NO-SUCH-SKU' }, 10_001));
} finally {
  await client.end();
  await db.close();
  if (!kept) await dropSchema(url, schema);
}
