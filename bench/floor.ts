/**
 * Child process: the floor. A plain `node:http` server with a `pg.Pool` configured like the app's
 * (bench/countingPool.ts) that answers the benchmark's requests by running the
 * same SQL statements the app runs (src/store/orders.ts, customers.ts, products.ts) and writing
 * the same JSON with JSON.stringify. No auth, no GraphQL, no validation of rows: whatever the app
 * spends beyond this is the cost of its framework and its rules.
 * Its SQL statements and /graphql requests are counted and shown at GET /metrics as the app's are.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createCountingPool } from './countingPool.js';
import { filteredPageSql, PAGE_COLUMNS } from './orderPageSql.js';
import { reportFailure, serveHttpToParent } from './ipc.js';

const ORDER_COLUMNS = 'id, customer_id, status, total_cents, version, created_at, updated_at';
/** Same clamp as the app's PAGE.max. */
const MAX_FIRST = 100;

interface OrderRow {
  id: string;
  customer_id: string;
  status: string;
}
interface CustomerRow {
  id: string;
  name: string;
}
interface ProductRow {
  sku: string;
  name: string;
  price_cents: number;
}

try {
  /** The customer id the app would find for alice's subject (it caches that in memory too). */
  const ownerId = process.env.BENCH_OWNER_CUSTOMER_ID!;
  const db = createCountingPool();
  const { query } = db;

  /** Like the app's DataLoader: one statement for the distinct customer ids of the orders. */
  async function withCustomers(orders: OrderRow[]) {
    if (!orders.length) return [];
    const ids = [...new Set(orders.map((o) => o.customer_id))];
    const customers = await query<CustomerRow>(
      'select id, subject, name, email from customers where id = any($1::text[])',
      [ids],
    );
    const byId = new Map(customers.map((c) => [c.id, c]));
    return orders.map((o) => {
      const c = byId.get(o.customer_id)!;
      return { id: o.id, status: o.status, customer: { id: c.id, name: c.name } };
    });
  }

  async function recentOrders(first: number) {
    const orders = await query<OrderRow>(
      `select ${ORDER_COLUMNS} from orders order by created_at desc, id desc limit $1`,
      [Math.min(first, MAX_FIRST)],
    );
    return { data: { recentOrders: await withCustomers(orders) } };
  }

  /**
   * The `orders` connection's keyset page as store/orderPages.ts writes it: one scan per status merged in key order,
   * and, after a cursor, the page read from the cursor's own row (inclusive, one row more), which tells that a row lies
   * behind it; the bench's cursor is a live order, so the store's fallback probe never runs.
   */
  async function ordersPage(first: number, statuses: string[] | null, since: string | null, after: string | null) {
    let rows: OrderRow[];
    if (statuses) {
      rows = await query(filteredPageSql(first), [statuses, since]);
    } else if (after) {
      const [at, id] = JSON.parse(Buffer.from(after, 'base64url').toString('utf8')) as [string, string];
      rows = await query(
        `select ${PAGE_COLUMNS} from orders o where (o.created_at, o.id) <= ($1::timestamptz, $2)
         order by o.created_at desc, o.id desc limit ${first + 2}`,
        [at, id],
      );
      rows = rows.slice(rows[0]?.id === id ? 1 : 0);
    } else {
      rows = await query(
        `select ${PAGE_COLUMNS} from orders o order by o.created_at desc, o.id desc limit ${first + 1}`,
        [],
      );
    }
    const nodes = await withCustomers(rows.slice(0, first));
    return { data: { orders: { nodes } } };
  }

  async function order(id: string) {
    const [row] = await query<OrderRow>(`select ${ORDER_COLUMNS} from orders where id = $1`, [id]);
    // The app shows a customer only their own orders; its subject → customer id lookup is cached.
    if (!row || row.customer_id !== ownerId) return { data: { order: null } };
    const [withCustomer] = await withCustomers([row]);
    return { data: { order: withCustomer } };
  }

  async function products() {
    const rows = await query<ProductRow>('select sku, name, price_cents from products order by sku', []);
    return { data: { products: rows.map((p) => ({ sku: p.sku, name: p.name, priceCents: p.price_cents })) } };
  }

  /** Picks the scenario from the query text with a regex: recognising it is not parsing GraphQL. */
  async function answer(body: { query?: string; variables?: { id?: string; after?: string } }) {
    const first = /recentOrders\(first:\s*(\d+)\)/.exec(body.query ?? '');
    if (first) return recentOrders(Number(first[1]));
    const page = /\borders\(first:\s*(\d+)/.exec(body.query ?? '');
    if (page) {
      const statuses = /status:\s*\[([A-Z, ]+)\]/
        .exec(body.query ?? '')?.[1]
        ?.split(/,\s*/)
        .map((s) => s.toLowerCase());
      const since = /gte:\s*"([^"]+)"/.exec(body.query ?? '')?.[1] ?? null;
      return ordersPage(Number(page[1]), statuses ?? null, since, body.variables?.after ?? null);
    }
    if (/\border\(/.test(body.query ?? '') && body.variables?.id) return order(body.variables.id);
    if (/\bproducts\b/.test(body.query ?? '')) return products();
    return null;
  }

  function send(res: ServerResponse, status: number, body: string, type = 'application/json; charset=utf-8') {
    res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }

  async function readBody(req: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://floor');
    if (req.method === 'GET' && url.pathname === '/metrics') {
      return send(res, 200, db.metricsText(), 'text/plain; version=0.0.4');
    }
    if (url.pathname !== '/graphql') return send(res, 404, '{"error":"not found"}');
    db.countRequest();
    const result =
      req.method === 'GET'
        ? await answer({ query: url.searchParams.get('query') ?? '' })
        : await answer(JSON.parse(await readBody(req)) as Parameters<typeof answer>[0]);
    if (!result) return send(res, 400, '{"error":"the floor does not know this query"}');
    send(res, 200, JSON.stringify(result));
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, JSON.stringify({ error: String(error) }));
    });
  });
  await serveHttpToParent(server, db.close);
} catch (error) {
  reportFailure(error);
}
