import type { Position } from './cursors.js';
import type { Order, OrderStatus } from './model.js';

/** What a keyset scan of orders is made of: the store's port (ports.ts) and the listing use case share these. */

export type OrderSortField = 'createdAt' | 'updatedAt';
export interface OrderSort {
  readonly field: OrderSortField;
  readonly direction: 'asc' | 'desc';
}
export const DEFAULT_SORT: OrderSort = { field: 'createdAt', direction: 'desc' };

/** The checked filter the store applies; `customerId` is the one who-sees-what leaves. */
export interface OrderListFilter {
  readonly statuses?: readonly OrderStatus[];
  readonly createdGte?: string;
  readonly createdLt?: string;
  readonly customerId?: string;
  readonly sku?: string;
}

/** One keyset scan: rows strictly after `after` and strictly before `until`, in `sort` order, at most `limit`. */
export interface OrderScan {
  readonly filter: OrderListFilter;
  readonly sort: OrderSort;
  readonly after?: Position;
  readonly until?: Position;
  readonly limit: number;
  /** Also say whether a row lies at or before `after` (pageInfo's other side, exactly, in the same statement). */
  readonly probe: boolean;
}

export interface PositionedOrder {
  readonly order: Order;
  readonly position: Position;
}
