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

/**
 * The domain's repositories over one connection or one open transaction. A class, with the getters on its prototype:
 * an object literal with getters, made for every transaction, keeps what it reaches alive through young-generation
 * collections (see Loaders in domain/loaders.ts).
 */
class RepositoriesOver implements Repositories {
  readonly #db: Queryable;
  #directory: DirectoryRepository | undefined;
  #webhooks: WebhookRepository | undefined;
  readonly orders: Repositories['orders'];
  readonly customers: Repositories['customers'];
  readonly products: Repositories['products'];
  readonly events: Repositories['events'];
  readonly idempotency: Repositories['idempotency'];

  constructor(db: Queryable) {
    this.#db = db;
    const functions = repositoryFunctions(db);
    this.orders = functions.orders;
    this.customers = functions.customers;
    this.products = functions.products;
    this.events = functions.events;
    this.idempotency = functions.idempotency;
  }

  // Made on first use: most transactions are about orders.
  get directory(): DirectoryRepository {
    return (this.#directory ??= directoryRows(this.#db));
  }

  get webhooks(): WebhookRepository {
    return (this.#webhooks ??= webhookRows(this.#db));
  }
}

function repositoryFunctions(db: Queryable): Omit<Repositories, 'directory' | 'webhooks'> {
  return {
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
class StorageOver extends RepositoriesOver implements Storage {
  readonly #db: Database;
  constructor(db: Database) {
    super(db);
    this.#db = db;
  }
  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T> {
    return this.#db.transaction((tx) => work(new RepositoriesOver(tx)));
  }
}

export function createStorage(db: Database): Storage {
  return new StorageOver(db);
}
