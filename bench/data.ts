import { randomUUID } from 'node:crypto';
import pg from 'pg';

/** Places one order of one keyboard over REST (keyed, as clients retry it) at `baseUrl`; its id, or an error. */
export async function placeOrder(baseUrl: string, token: string): Promise<string> {
  const res = await fetch(`${baseUrl}/v1/orders`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'idempotency-key': randomUUID(),
    },
    body: JSON.stringify({ items: [{ sku: 'KB-001', qty: 1 }] }),
  });
  if (res.status !== 201) throw new Error(`POST /v1/orders: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

/** An admin connection to the bench schema (for growing data and looking things up, never under load). */
export async function connect(url: string, schema: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, options: `-c search_path="${schema}"` });
  await client.connect();
  return client;
}

/**
 * Null when PostgreSQL answers at `url`, else one line saying why not and what to do: the bench measures against a
 * real server and has nothing to say without one.
 */
export async function postgresProblem(url: string, shown: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    await client.query('select 1');
    return null;
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    return (
      `npm run bench needs PostgreSQL: ${shown} answered ${code ?? message ?? String(error)}. ` +
      'Start one (docker compose up -d postgres) or set DATABASE_URL.'
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`drop schema if exists "${schema}" cascade`);
  } finally {
    await client.end();
  }
}

/**
 * Grows the seeded 400 orders to `target` with one statement, so that "newest first" is answered
 * from a table where only the index makes it cheap. Ids follow src/domain/ids.ts (`ord_`, 10
 * Crockford base32 characters of the creation time in ms, 16 random ones — hex digits are in that
 * alphabet); created_at is spread over the last year; each order gets 1–3 lines from the catalogue
 * and the matching total, and a status and version consistent with its age, like the seed.
 */
export async function growOrders(client: pg.Client, target: number): Promise<{ before: number; after: number }> {
  const count = async () => Number((await client.query('select count(*)::int as n from orders')).rows[0].n);
  const before = await count();
  if (before < target) {
    await client.query(
      `with
        c as (select array_agg(id order by id) as ids from customers),
        p as (select array_agg(sku order by sku) as skus, array_agg(price_cents order by sku) as prices from products),
        o as materialized (
          select g,
                 now() - interval '1 minute' - random() * interval '365 days' as created_at,
                 c.ids[1 + floor(random() * cardinality(c.ids))::int] as customer_id,
                 1 + floor(random() * 3)::int as line_count,
                 random() as r
          from generate_series(1, $1::int) as g cross join c
        ),
        named as materialized (
          select o.*,
                 'ord_' || t.ts || substr(md5(o.g::text || random()::text), 1, 16) as id,
                 case when o.r < 0.06 then 'cancelled'
                      when o.created_at < now() - interval '14 days' then 'delivered'
                      when o.created_at < now() - interval '1 day' then 'shipped'
                      else 'paid' end as status
          from o cross join lateral (
            select string_agg(
                     substr('0123456789abcdefghjkmnpqrstvwxyz',
                            ((((extract(epoch from o.created_at) * 1000)::bigint) >> (5 * (9 - k))) & 31)::int + 1, 1),
                     '' order by k) as ts
            from generate_series(0, 9) as k
          ) t
        ),
        lines as materialized (
          select n.id as order_id, l.line_no, p.skus[l.idx] as sku, 1 + floor(random() * 3)::int as qty,
                 p.prices[l.idx] as unit_price_cents
          from named n cross join p
          cross join lateral (
            select line_no, 1 + (n.g * 7 + line_no * 5) % cardinality(p.skus) as idx
            from generate_series(1, n.line_count) as line_no
          ) l
        ),
        new_orders as (
          insert into orders (id, customer_id, status, total_cents, version, created_at, updated_at)
          select n.id, n.customer_id, n.status, t.total, v.version, n.created_at,
                 least(now(), n.created_at + v.version * interval '1 hour')
          from named n
          join (select order_id, sum(qty * unit_price_cents)::int as total from lines group by order_id) t
            on t.order_id = n.id
          cross join lateral (
            select case n.status when 'shipped' then 3 when 'delivered' then 4 else 2 end as version
          ) v
          returning id
        )
      insert into order_items (order_id, line_no, sku, qty, unit_price_cents)
      select order_id, line_no, sku, qty, unit_price_cents from lines`,
      [target - before],
    );
    // Fresh statistics and a visibility map, as autovacuum would have them on a table that grew over time (without
    // the map, every index-only scan reads the heap too).
    await client.query('vacuum (analyze) orders, order_items');
  }
  return { before, after: await count() };
}

/** How PostgreSQL answers the staff list: it must be a walk down orders_recent_idx, not a sort. */
export async function recentOrdersPlan(client: pg.Client): Promise<string> {
  const { rows } = await client.query(
    `explain (format json) select id, customer_id, status, total_cents, version, created_at, updated_at
     from orders order by created_at desc, id desc limit 100`,
  );
  type PlanNode = { 'Node Type': string; 'Index Name'?: string; Plans?: PlanNode[] };
  const parts: string[] = [];
  for (let node: PlanNode | undefined = rows[0]['QUERY PLAN'][0].Plan; node; node = node.Plans?.[0]) {
    parts.push(node['Index Name'] ? `${node['Node Type']} (${node['Index Name']})` : node['Node Type']);
  }
  return parts.join(' → ');
}

export async function customerIdOf(client: pg.Client, subject: string): Promise<string> {
  const { rows } = await client.query('select id from customers where subject = $1', [subject]);
  if (!rows[0]) throw new Error(`no customer for subject ${subject}`);
  return rows[0].id as string;
}

/** One of the customer's orders from the middle of their history (not the newest, not cached anywhere). */
export async function someOrderOf(client: pg.Client, customerId: string): Promise<string> {
  const { rows } = await client.query(
    `select id from orders where customer_id = $1 order by created_at desc, id desc limit 51`,
    [customerId],
  );
  if (!rows.length) throw new Error(`customer ${customerId} has no orders`);
  return rows[rows.length - 1].id as string;
}

/** The position `depth` orders down the newest-first list, as the `orders` connection's cursors hold it. */
export async function deepPosition(
  client: pg.Client,
  depth: number,
): Promise<{ key: string; id: string; depth: number }> {
  const { rows } = await client.query<{ id: string; key: string }>(
    `select id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00' as key
     from orders order by created_at desc, id desc offset $1 limit 1`,
    [depth],
  );
  return { ...rows[0]!, depth };
}
