import type { DirectoryRepository, Repositories, Storage, WebhookRepository } from '../domain/ports.js';
import { customerBySubject, customersByIds, insertCustomerForSubject } from './customers.js';
import type { Database, Queryable } from './db.js';
import { directoryRows } from './directory.js';
import { appendEvent, eventsAfter } from './events.js';
import { claimKey, findKey, saveKey } from './idempotency.js';
import {
  deleteOrder,
  findOrder,
  insertOrder,
  itemsOfOrders,
  listOrders,
  listOrdersOfCustomers,
  replaceOrderItems,
  updateOrderStatus,
} from './orders.js';
import { countOrders, ordersByIds, scanOrders } from './orderPages.js';
import { allProducts } from './products.js';
import { webhookRows } from './webhooks.js';

/** The domain's repositories over one connection or one open transaction. */
export function repositoriesOver(db: Queryable): Repositories {
  let directory: DirectoryRepository | undefined;
  let webhooks: WebhookRepository | undefined;
  return {
    // Made on first use: most transactions are about orders.
    get directory() {
      return (directory ??= directoryRows(db));
    },
    get webhooks() {
      return (webhooks ??= webhookRows(db));
    },
    orders: {
      find: (id) => findOrder(db, id),
      list: (opts) => listOrders(db, opts),
      scan: (scan) => scanOrders(db, scan),
      count: (filter, bound) => countOrders(db, filter, bound),
      byIds: (ids) => ordersByIds(db, ids),
      listOfCustomers: (customerIds, limit) => listOrdersOfCustomers(db, customerIds, limit),
      itemsOf: (orderIds) => itemsOfOrders(db, orderIds),
      insert: (order, lines) => insertOrder(db, order, lines),
      updateStatus: (id, status, expectedVersion) => updateOrderStatus(db, id, status, expectedVersion),
      replaceItems: (id, expectedVersion, lines, totalCents) =>
        replaceOrderItems(db, id, expectedVersion, lines, totalCents),
      delete: (id, expectedVersion) => deleteOrder(db, id, expectedVersion),
    },
    customers: {
      byIds: (ids) => customersByIds(db, ids),
      bySubject: (subject) => customerBySubject(db, subject),
      insertForSubject: (customer) => insertCustomerForSubject(db, customer),
    },
    products: { all: () => allProducts(db) },
    events: {
      append: (kind, order) => appendEvent(db, kind, order),
      after: (afterId, limit) => eventsAfter(db, afterId, limit),
    },
    idempotency: {
      claim: (scope, key) => claimKey(db, scope, key),
      find: (scope, key) => findKey(db, scope, key),
      save: (scope, key, record) => saveKey(db, scope, key, record),
    },
  };
}

/** The domain's storage port over a database: its repositories, and transactions over them. */
export function createStorage(db: Database): Storage {
  return { ...repositoriesOver(db), transaction: (work) => db.transaction((tx) => work(repositoriesOver(tx))) };
}
