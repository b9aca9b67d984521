import type { Migration } from './migration.js';

/**
 * Order lists as connections (filters and sorts, keyset pages): an index for each filter and sort, so that a page is a
 * range scan that reads about as many index entries as it returns, at any depth. Every index ends in `id`, the
 * tie-breaker of every position; a btree is read in either direction, so one index serves ASC and DESC. The EXPLAIN
 * plans are in docs/orders-listing.md.
 */
export const ORDER_LISTING_MIGRATIONS: readonly Migration[] = [
  {
    version: 60,
    name: 'order listing indexes',
    statements: [
      // (created_at, id) and (customer_id, created_at, id) exist since migration 1.
      `create index orders_updated_idx on orders (updated_at, id)`,
      `create index orders_customer_updated_idx on orders (customer_id, updated_at, id)`,
      // One scan per status (see store/orderPages.ts): each reads its own range in key order.
      `create index orders_status_created_idx on orders (status, created_at, id)`,
      `create index orders_status_updated_idx on orders (status, updated_at, id)`,
      `create index orders_customer_status_created_idx on orders (customer_id, status, created_at, id)`,
      `create index orders_customer_status_updated_idx on orders (customer_id, status, updated_at, id)`,
      // The sku filter: the orders that contain a product.
      `create index order_items_sku_idx on order_items (sku, order_id)`,
    ],
  },
];
