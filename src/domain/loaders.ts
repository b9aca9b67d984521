import DataLoader from 'dataloader';
import type { Customer, Order, OrderItem } from './model.js';
import type { Repositories } from './ports.js';

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

type Repos = Pick<Repositories, 'customers' | 'orders'>;

/**
 * Batching loaders for one request. They cache per request only, and carry no authorization:
 * callers pass ids of records the domain has already let them see. Each is made on first use: most requests
 * (a product list, a mutation, one order) need one loader or none.
 *
 * A class, with its getters on the prototype. An object literal with getters, made per request, gave each request
 * hidden-class data of its own that V8 keeps in the old generation: from there, every young-generation collection
 * took the request's loaders and all they reach (their promises, rows, the result being built) for live until a full
 * collection, so that most of what a list request allocated was copied into the old generation (bench/README.md).
 */
export class Loaders {
  readonly #repos: Repos;
  #customer: DataLoader<string, Customer | null> | undefined;
  #order: DataLoader<string, Order | null> | undefined;
  #orderItems: DataLoader<string, OrderItem[]> | undefined;
  #customerOrders: DataLoader<{ customerId: string; first: number }, Order[], string> | undefined;

  constructor(repos: Repos) {
    this.#repos = repos;
  }

  get customer(): DataLoader<string, Customer | null> {
    const repos = this.#repos;
    return (this.#customer ??= new DataLoader<string, Customer | null>(async (ids) => {
      const byId = new Map((await repos.customers.byIds(ids)).map((c) => [c.id, c]));
      return ids.map((id) => byId.get(id) ?? null);
    }));
  }

  get order(): DataLoader<string, Order | null> {
    const repos = this.#repos;
    return (this.#order ??= new DataLoader<string, Order | null>(async (ids) => {
      const byId = new Map((await repos.orders.byIds(ids)).map((o) => [o.id, o]));
      return ids.map((id) => byId.get(id) ?? null);
    }));
  }

  get orderItems(): DataLoader<string, OrderItem[]> {
    const repos = this.#repos;
    return (this.#orderItems ??= new DataLoader<string, OrderItem[]>(async (orderIds) => {
      const byOrder = groupBy(await repos.orders.itemsOf(orderIds), (i) => i.orderId);
      return orderIds.map((id) => byOrder.get(id) ?? []);
    }));
  }

  get customerOrders(): DataLoader<{ customerId: string; first: number }, Order[], string> {
    const repos = this.#repos;
    return (this.#customerOrders ??= new DataLoader<{ customerId: string; first: number }, Order[], string>(
      async (keys) => {
        const results = new Map<string, Order[]>();
        for (const [first, group] of groupBy(keys, (k) => String(k.first))) {
          const orders = await repos.orders.listOfCustomers(
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
    ));
  }
}
