import { randomBytes } from 'node:crypto';
import type { OrderListFilter, OrderScan } from '../src/domain/orderScan.js';
import { migrate } from '../src/store/migrations.js';
import { openDatabase } from '../src/store/open.js';
import { countOrders, scanOrders } from '../src/store/orderPages.js';
import { seed } from '../src/store/seed.js';
import { connect, dropSchema, growOrders } from './data.js';

/**
 * The plans of the order lists' SQL (store/orderPages.ts), as docs/orders-listing.md shows them: a fresh schema grown
 * to ORDERS orders, then EXPLAIN (ANALYZE, BUFFERS) of the very statements a page runs, for each filter and sort.
 * `tsx bench/explainOrderLists.ts [orders]` (DATABASE_URL, default the local server); the schema is dropped after.
 */
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ORDERS = Number(process.argv[2] ?? 200_000);
const schema = `explain_${randomBytes(4).toString('hex')}`;

const db = await openDatabase({ kind: 'postgres', url, schema });
const client = await connect(url, schema);
try {
  await migrate(db);
  await seed(db);
  await growOrders(client, ORDERS);
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
      `default, half-way down (${Math.floor(ORDERS / 2)} orders in), with the previous-page probe`,
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
    [
      'sku KB-001, newest first',
      { filter: { sku: 'KB-001' }, sort: { field: 'createdAt', direction: 'desc' }, limit: 51, probe: false },
    ],
  ];
  const explain = async (
    title: string,
    run: (q: { query: (sql: string, params?: readonly unknown[]) => Promise<never[]> }) => Promise<unknown>,
  ) => {
    let captured: { sql: string; params: readonly unknown[] } | undefined;
    await run({
      query: async (sql, params = []) => {
        captured = { sql, params };
        return [];
      },
    }).catch(() => undefined);
    const plan = await client.query(`explain (analyze, buffers, costs off, timing off, summary off) ${captured!.sql}`, [
      ...captured!.params,
    ]);
    console.log(
      `### ${title}\n\n\`\`\`\n${plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n')}\n\`\`\`\n`,
    );
  };
  for (const [title, scan] of cases) await explain(title, (q) => scanOrders(q, scan));
  const filter: OrderListFilter = { statuses: ['paid', 'shipped'], createdGte: monthAgo };
  await explain('totalCount of status paid,shipped + the last 30 days (bounded at 10,000)', (q) =>
    countOrders(q, filter, 10_001),
  );
} finally {
  await client.end();
  await db.close();
  await dropSchema(url, schema);
}
