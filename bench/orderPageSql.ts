/**
 * The `orders` connection's keyset page as store/orderPages.ts writes it, for the floor (bench/floor.ts) and the peers
 * (bench/peers/shared.ts) to run the same statements as the app.
 */

/** The page's columns: an order's, and its position at full precision (the cursor's key). */
export const PAGE_COLUMNS =
  "o.id, o.customer_id, o.status, o.total_cents, o.version, o.created_at, o.updated_at, to_char(o.created_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00' as sort_key";

/**
 * A page of orders with one of the statuses in $1 (text[]) created at or after $2: one scan per status merged in key
 * order, one row more than the page (that row tells there is a next page).
 */
export const filteredPageSql = (first: number) =>
  `select p.* from unnest($1::text[]) as st(status)
    cross join lateral (select ${PAGE_COLUMNS} from orders o
      where o.created_at >= $2::timestamptz and o.status = st.status
      order by o.created_at desc, o.id desc limit ${first + 1}) p
    order by created_at desc, id desc limit ${first + 1}`;
