import type {
  DirectoryGroup,
  DirectoryGroupInput,
  DirectoryGroupWithMembers,
  DirectoryQuery,
  DirectoryUser,
  DirectoryUserInput,
  GroupField,
  UserField,
} from './directory.js';
import type {
  Customer,
  EventKind,
  Order,
  OrderEvent,
  OrderItem,
  OrderStatus,
  OrderWithItems,
  PricedLine,
  Product,
} from './model.js';
import type { OrderListFilter, OrderScan, PositionedOrder } from './orderScan.js';
import type { WebhookRepository } from './webhookPorts.js';

/**
 * What the domain needs from storage, declared here and implemented in src/store/. The domain never sees
 * SQL, a connection or a row: it calls these with domain types and gets domain types back. The webhooks' own are in
 * webhookPorts.ts.
 */
export type * from './webhookPorts.js';

export interface OrderRepository {
  find(id: string): Promise<Order | null>;
  /** Newest first; `customerId` narrows to one customer, `after` continues a previous page. */
  list(opts: { readonly customerId?: string; readonly limit: number }): Promise<Order[]>;
  /** One keyset page (no OFFSET), in one statement; `behind` answers the scan's `probe`. */
  scan(scan: OrderScan): Promise<{ rows: PositionedOrder[]; behind: boolean }>;
  /** How many orders match, counting no further than `bound`. */
  count(filter: OrderListFilter, bound: number): Promise<number>;
  /** These orders, in any order; unknown ids are left out. */
  byIds(ids: readonly string[]): Promise<Order[]>;
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

/** Which rows of a filtered list one page holds. */
export interface PageWindow {
  readonly offset: number;
  readonly limit: number;
}

/** The directory's users and groups (SCIM provisioning). Deleted users stay as rows that refuse their tokens. */
export interface DirectoryRepository {
  /**
   * Every directory write starts here, inside its transaction: it waits for any other directory write to commit,
   * and returns the revision this one's changes are stamped with (a decimal string).
   */
  takeTurn(): Promise<string>;
  /** A user that is not deleted. */
  findUser(id: string): Promise<DirectoryUser | null>;
  /** Users that are not deleted, oldest first. */
  listUsers(
    query: DirectoryQuery<UserField> | null,
    window: PageWindow,
  ): Promise<{ total: number; items: DirectoryUser[] }>;
  /** Whether another user that is not deleted has this userName, compared without regard to case. */
  userNameTaken(userName: string, exceptId: string | null): Promise<boolean>;
  /** Whether another user that is not deleted has this externalId. */
  externalIdTaken(externalId: string, exceptId: string | null): Promise<boolean>;
  /** Inserts the user, replacing a deleted one with the same externalId; an inactive one is refused from now. */
  insertUser(id: string, input: DirectoryUserInput, revision: string): Promise<DirectoryUser>;
  /**
   * When the user's externalId is about to change: keeps refusing under its current key what the user refuses once
   * this write is done (`activeAfter`), as a deleted row of that key with the new `id`: all of its tokens when the
   * user is or becomes inactive, else those issued before its last deactivation. Nothing when that refuses nothing.
   */
  keepRefusing(userId: string, id: string, revision: string, activeAfter: boolean): Promise<void>;
  /**
   * Replaces the user's attributes; going inactive refuses tokens issued before now, even after reactivation. A
   * deleted row with the new externalId is what the user takes over: the tokens it refused stay refused.
   */
  updateUser(id: string, input: DirectoryUserInput, revision: string): Promise<DirectoryUser | null>;
  /** Marks the user deleted (and inactive) and takes it out of every group. */
  deleteUser(id: string, revision: string): Promise<boolean>;
  /** Revokes every browser session signed in with this directory key; returns how many. */
  revokeSessionsOf(directoryKey: string): Promise<number>;
  /** Of these ids, the users that exist and are not deleted. */
  liveUserIds(ids: readonly string[]): Promise<Set<string>>;
  findGroup(id: string): Promise<DirectoryGroup | null>;
  /** Groups oldest first. */
  listGroups(
    query: DirectoryQuery<GroupField> | null,
    window: PageWindow,
  ): Promise<{ total: number; items: DirectoryGroup[] }>;
  /** The members of these groups, each with the user's display name, by group id. */
  membersOf(groupIds: readonly string[]): Promise<Map<string, DirectoryGroupWithMembers['members']>>;
  /** Whether another group has this displayName, compared without regard to case. */
  groupNameTaken(displayName: string, exceptId: string | null): Promise<boolean>;
  insertGroup(id: string, input: DirectoryGroupInput, revision: string): Promise<DirectoryGroup>;
  updateGroup(
    id: string,
    change: {
      readonly displayName: string;
      readonly externalId: string | null;
      readonly added: readonly string[];
      readonly removed: readonly string[];
    },
    revision: string,
  ): Promise<DirectoryGroup | null>;
  deleteGroup(id: string): Promise<boolean>;
}

/** The repositories over one connection or one open transaction. */
export interface Repositories {
  readonly directory: DirectoryRepository;
  readonly orders: OrderRepository;
  readonly customers: CustomerRepository;
  readonly products: ProductRepository;
  readonly events: EventRepository;
  readonly idempotency: IdempotencyRepository;
  readonly webhooks: WebhookRepository;
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

/** A directory user as the access rules need it (domain/directoryAccess.ts). */
export interface DirectoryUserState {
  readonly id: string;
  /** Its externalId: the directory key that links it to credentials; null when it has none. */
  readonly key: string | null;
  /** False when deactivated or deleted. */
  readonly active: boolean;
  /** The last deactivation (ms since the epoch): tokens issued before it stay refused; null if never. */
  readonly tokensValidAfter: number | null;
}

/** What the directory feed hands the access rules: everything at first (`full`), then each change. */
export interface DirectoryChanges {
  readonly full: boolean;
  /** With `full`, every user that refuses someone; otherwise every user written since the last delivery. */
  readonly users: readonly DirectoryUserState[];
  /** The directory keys of the staff group's members; null when the directory has no staff group. */
  readonly staff: ReadonlySet<string> | null;
}

/** Carries directory changes to every replica; store/ implements it over Redis and the database. */
export interface DirectoryFeed {
  /**
   * A directory write has committed on this replica: resolves once this replica's access rules have it; the other
   * replicas are told at once.
   */
  announce(): Promise<void>;
}
