import DataLoader from 'dataloader';
import type { Queryable } from '../store/db.js';
import { customersByIds } from '../store/customers.js';
import { itemsOfOrders, listOrdersOfCustomers } from '../store/orders.js';
import type { Customer } from './customers.js';
import type { Order, OrderItem } from './orders.js';

export function groupBy<T>(values: readonly T[], key: (v: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const v of values) {
    const k = key(v);
    const group = groups.get(k);
    if (group) group.push(v);
    else groups.set(k, [v]);
  }
  return groups;
}

/**
 * Batching loaders for one request. They cache per request only, and carry no authorization:
 * callers pass ids of records the domain has already let them see.
 */
export function createLoaders(db: Queryable) {
  return {
    customer: new DataLoader<string, Customer | null>(async (ids) => {
      const byId = new Map((await customersByIds(db, ids)).map((c) => [c.id, c]));
      return ids.map((id) => byId.get(id) ?? null);
    }),
    orderItems: new DataLoader<string, OrderItem[]>(async (orderIds) => {
      const byOrder = groupBy(await itemsOfOrders(db, orderIds), (i) => i.orderId);
      return orderIds.map((id) => byOrder.get(id) ?? []);
    }),
    customerOrders: new DataLoader<{ customerId: string; first: number }, Order[], string>(
      async (keys) => {
        const results = new Map<string, Order[]>();
        for (const [first, group] of groupBy(keys, (k) => String(k.first))) {
          const orders = await listOrdersOfCustomers(
            db,
            group.map((k) => k.customerId),
            Number(first),
          );
          for (const [customerId, list] of groupBy(orders, (o) => o.customerId)) {
            results.set(`${customerId}:${first}`, list);
          }
        }
        return keys.map((k) => results.get(`${k.customerId}:${k.first}`) ?? []);
      },
      { cacheKeyFn: (k) => `${k.customerId}:${k.first}` },
    ),
  };
}

export type Loaders = ReturnType<typeof createLoaders>;
