import type {
  Customer,
  EventKind,
  Order,
  OrderCursor,
  OrderEvent,
  OrderItem,
  OrderStatus,
  OrderWithItems,
  PricedLine,
  Product,
} from './model.js';

/**
 * What the domain needs from storage, declared here and implemented in src/store/. The domain never sees
 * SQL, a connection or a row: it calls these with domain types and gets domain types back.
 */

export interface OrderRepository {
  find(id: string): Promise<Order | null>;
  /** Newest first; `customerId` narrows to one customer, `after` continues a previous page. */
  list(opts: { readonly customerId?: string; readonly limit: number; readonly after?: OrderCursor }): Promise<Order[]>;
  /** The newest `limit` orders of each customer, in one statement. */
  listOfCustomers(customerIds: readonly string[], limit: number): Promise<Order[]>;
  /** The lines of these orders, by order then line number. */
  itemsOf(orderIds: readonly string[]): Promise<OrderItem[]>;
  insert(order: Order, lines: readonly PricedLine[]): Promise<OrderItem[]>;
  /** Compare-and-set on the version: null when the order is gone or has moved on. */
  updateStatus(id: string, status: OrderStatus, expectedVersion: number): Promise<Order | null>;
  /** Replaces the lines of a pending order, compare-and-set on the version. */
  replaceItems(
    id: string,
    expectedVersion: number,
    lines: readonly PricedLine[],
    totalCents: number,
  ): Promise<OrderWithItems | null>;
  /** Deletes the order (and its lines) if it is still at the expected version. */
  delete(id: string, expectedVersion: number): Promise<boolean>;
}

export interface CustomerRepository {
  byIds(ids: readonly string[]): Promise<Customer[]>;
  bySubject(subject: string): Promise<Customer | null>;
  /** Inserts the customer unless the subject already has one; either way returns the stored customer. */
  insertForSubject(customer: Customer & { readonly subject: string }): Promise<Customer>;
}

export interface ProductRepository {
  all(): Promise<Product[]>;
}

export interface EventRepository {
  /** Appends an event inside the caller's transaction; its id is in commit order. */
  append(kind: EventKind, order: Order): Promise<OrderEvent>;
  /** Events after `afterId`, oldest first, within the retention window. */
  after(afterId: string, limit: number): Promise<OrderEvent[]>;
}

/** What a create under an idempotency key recorded: the request's fingerprint and what it created. */
export interface IdempotencyRecord {
  readonly fingerprint: string;
  readonly orderId: string;
  /** The order and lines as first created, replayed to a retry; null for records kept without it. */
  readonly created: OrderWithItems | null;
}

export interface IdempotencyRepository {
  /**
   * Claims (scope, key) for this transaction. False means another transaction holds it right now: the first
   * request with this key is still in flight.
   */
  claim(scope: string, key: string): Promise<boolean>;
  find(scope: string, key: string): Promise<IdempotencyRecord | null>;
  save(scope: string, key: string, record: IdempotencyRecord): Promise<void>;
}

/** The repositories over one connection or one open transaction. */
export interface Repositories {
  readonly orders: OrderRepository;
  readonly customers: CustomerRepository;
  readonly products: ProductRepository;
  readonly events: EventRepository;
  readonly idempotency: IdempotencyRepository;
}

/** The repositories over the database, and a way to use them in one transaction. */
export interface Storage extends Repositories {
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T>;
}

/** Carries committed events to every listener, in this process and on other replicas. */
export interface EventChannel {
  /** An event whose transaction has committed. */
  publish(event: OrderEvent): void;
  /** Every committed event, once, in id order; returns a function that stops listening. */
  listen(listener: (event: OrderEvent) => void): () => void;
}

/**
 * Beside the domain's own ports, the one authentication needs from storage, declared here so that store/ implements
 * every port without importing auth/. Remembers DPoP proof ids until they expire, across every replica: a proof is
 * good for one request only (RFC 9449 §11.1). `claim` resolves true the first time a key is seen and false on every
 * later try.
 */
export interface ProofReplayStore {
  claim(key: string, expiresAt: Date): Promise<boolean>;
  close(): void;
}
