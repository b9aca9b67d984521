import { createHash } from 'node:crypto';
import type { Database, Queryable } from '../store/db.js';
import { customersByIds } from '../store/customers.js';
import { appendEvent, type StoredEvent } from '../store/events.js';
import { claimKey, findKey, saveKey } from '../store/idempotency.js';
import {
  deleteOrder,
  findOrder,
  insertOrder,
  itemsOfOrders,
  listOrders,
  replaceOrderItems,
  updateOrderStatus,
  type OrderCursor,
} from '../store/orders.js';
import type { Catalogue } from './catalogue.js';
import type { CustomerService } from './customers.js';
import { DomainError, invalidInput, notFound, preconditionFailed } from './errors.js';
import type { EventSink } from './events.js';
import { ID_PATTERN, newId } from './ids.js';
import { groupBy, type Loaders } from './loaders.js';
import {
  assertTransition,
  isOrderStatus,
  priceLines,
  type Order,
  type OrderItem,
  type OrderLineInput,
  type OrderStatus,
} from './orders.js';
import { isStaff, requireScope, SCOPES, type Principal, type User } from './policy.js';

export const PAGE = { default: 20, max: 100 } as const;

/** Lost compare-and-set races (without a client precondition) are retried this often. */
const MAX_WRITE_ATTEMPTS = 3;

export interface CreateOrderInput {
  readonly customerId?: string | null;
  readonly items: readonly OrderLineInput[];
}

/** A client's condition on the current order (an If-Match or a GraphQL etag), checked before writing. */
export type Precondition = (order: Order) => boolean;

export interface WriteOptions {
  readonly precondition?: Precondition;
}

export type CreateResult =
  | { readonly replayed: false; readonly order: Order; readonly items: OrderItem[]; readonly response: unknown }
  /** The key was used before with the same request: what was created then (null if since deleted). */
  | { readonly replayed: true; readonly order: Order | null; readonly response: unknown };

/** Keys are opaque to us; the bound keeps the table and its index small. */
export function isValidIdempotencyKey(key: string): boolean {
  return /^[\x21-\x7e]{1,255}$/.test(key);
}

function fingerprint(input: CreateOrderInput): string {
  const canonical = JSON.stringify({
    customerId: input.customerId ?? null,
    items: input.items.map((i) => ({ sku: i.sku, qty: i.qty })),
  });
  return createHash('sha256').update(canonical).digest('base64url');
}

export function createOrderService(deps: {
  db: Database;
  catalogue: Catalogue;
  customers: CustomerService;
  /** Told of each change after its transaction commits: the one place events leave the domain. */
  onEvent: EventSink;
}) {
  const { db, catalogue, customers } = deps;

  /** Runs a write and its event in one transaction, then publishes the event once committed. */
  async function withEvent<T>(
    work: (tx: Queryable) => Promise<{ value: T; event: StoredEvent } | null>,
  ): Promise<T | null> {
    const done = await db.transaction(work);
    if (!done) return null;
    deps.onEvent(done.event);
    return done.value;
  }

  /** Someone else's order is reported exactly like a missing one. */
  async function visibleOrder(user: User, id: string): Promise<Order | null> {
    if (!ID_PATTERN.test(id)) return null;
    const order = await findOrder(db, id);
    if (!order || isStaff(user)) return order;
    return order.customerId === (await customers.idFor(user)) ? order : null;
  }

  function clampFirst(first: number | null | undefined): number {
    if (first === null || first === undefined) return PAGE.default;
    if (!Number.isInteger(first) || first < 0) {
      throw invalidInput([{ pointer: '/first', reason: 'must be a non-negative integer' }]);
    }
    return Math.min(first, PAGE.max);
  }

  /**
   * Every change to an existing order: find it (if visible), check the client's precondition, then
   * `attempt` the write as a compare-and-set on the version read. A lost race re-reads and re-checks,
   * so a stale precondition ends in PRECONDITION_FAILED and never overwrites the winner.
   */
  async function writeVisible<T>(
    user: User,
    id: string,
    opts: WriteOptions,
    attempt: (order: Order) => Promise<T | null>,
  ): Promise<T> {
    for (let n = 1; ; n++) {
      const order = await visibleOrder(user, id);
      if (!order) throw notFound('Order');
      if (opts.precondition && !opts.precondition(order)) throw preconditionFailed();
      const result = await attempt(order);
      if (result !== null) return result;
      if (n >= MAX_WRITE_ATTEMPTS) {
        throw new DomainError('PRECONDITION_FAILED', 'The order kept changing; read it again and retry.');
      }
    }
  }

  async function changeStatus(principal: Principal, id: string, status: string, opts: WriteOptions = {}) {
    const user = requireScope(principal, SCOPES.write);
    if (!isOrderStatus(status)) assertTransition('pending', status);
    return writeVisible(user, id, opts, async (order) => {
      if (!isStaff(user) && !(status === 'cancelled' && order.status === 'pending')) {
        throw new DomainError('FORBIDDEN', 'Customers may only cancel their own pending orders.');
      }
      assertTransition(order.status, status);
      return withEvent(async (tx) => {
        const updated = await updateOrderStatus(tx, id, status as OrderStatus, order.version);
        return updated && { value: updated, event: await appendEvent(tx, 'updated', updated) };
      });
    });
  }

  async function resolveCustomer(user: User, named: string | null | undefined): Promise<string> {
    if (named === undefined || named === null) return customers.idFor(user);
    if (isStaff(user)) {
      const [found] = ID_PATTERN.test(named) ? await customersByIds(db, [named]) : [];
      if (!found) throw invalidInput([{ pointer: '/customer_id', reason: 'no such customer' }]);
      return found.id;
    }
    if (named === (await customers.idFor(user))) return named;
    throw new DomainError('FORBIDDEN', 'Customers may only place orders for themselves.');
  }

  return {
    async get(principal: Principal, id: string): Promise<Order | null> {
      return visibleOrder(requireScope(principal, SCOPES.read), id);
    },

    /** An order with its lines, or null when it is not visible. */
    async getWithItems(principal: Principal, id: string): Promise<{ order: Order; items: OrderItem[] } | null> {
      const order = await visibleOrder(requireScope(principal, SCOPES.read), id);
      return order ? { order, items: await itemsOfOrders(db, [order.id]) } : null;
    },

    /** Newest first: every order for staff, a customer's own otherwise. */
    async recent(principal: Principal, first?: number | null): Promise<Order[]> {
      const user = requireScope(principal, SCOPES.read);
      const limit = clampFirst(first);
      if (limit === 0) return [];
      return listOrders(db, isStaff(user) ? { limit } : { customerId: await customers.idFor(user), limit });
    },

    /** One page of the newest-first list with the orders' lines, plus whether more follow. */
    async page(
      principal: Principal,
      opts: { limit: number; after?: OrderCursor },
    ): Promise<{ orders: { order: Order; items: OrderItem[] }[]; hasMore: boolean }> {
      const user = requireScope(principal, SCOPES.read);
      const limit = Math.min(Math.max(1, opts.limit), PAGE.max);
      const rows = await listOrders(db, {
        limit: limit + 1,
        ...(opts.after ? { after: opts.after } : {}),
        ...(isStaff(user) ? {} : { customerId: await customers.idFor(user) }),
      });
      const orders = rows.slice(0, limit);
      const lines = orders.length
        ? await itemsOfOrders(
            db,
            orders.map((o) => o.id),
          )
        : [];
      const items = groupBy(lines, (i) => i.orderId);
      return {
        orders: orders.map((order) => ({ order, items: items.get(order.id) ?? [] })),
        hasMore: rows.length > limit,
      };
    },

    /** The lines of an order that the domain has already let the caller see. */
    itemsOf(order: Order): Promise<OrderItem[]> {
      return itemsOfOrders(db, [order.id]);
    },

    /** A customer's newest orders, for staff or for that customer. */
    async ofCustomer(principal: Principal, customerId: string, first: number | null | undefined, loaders: Loaders) {
      const user = requireScope(principal, SCOPES.read);
      if (!isStaff(user) && customerId !== (await customers.idFor(user))) return [];
      const limit = clampFirst(first);
      return limit === 0 ? [] : loaders.customerOrders.load({ customerId, first: limit });
    },

    /**
     * Places an order. With an idempotency key, the key record is written in the same transaction
     * as the order, so a crash leaves neither; a repeat of the same request replays the first
     * result, a different request under the key is refused, and so is a repeat while the first
     * is still in flight. `response` lets a transport store what it answered, for replaying.
     */
    async create(
      principal: Principal,
      input: CreateOrderInput,
      opts: { idempotencyKey?: string; response?: (created: { order: Order; items: OrderItem[] }) => unknown } = {},
    ): Promise<CreateResult> {
      const user = requireScope(principal, SCOPES.write);
      const key = opts.idempotencyKey;
      if (key !== undefined && !isValidIdempotencyKey(key)) {
        throw invalidInput([{ pointer: '/idempotencyKey', reason: 'must be 1 to 255 visible ASCII characters' }]);
      }
      const customerId = await resolveCustomer(user, input.customerId);
      const priced = priceLines(input.items, await catalogue.prices());
      const now = new Date();
      const order: Order = {
        id: newId('ord', now.getTime()),
        customerId,
        status: 'pending',
        totalCents: priced.totalCents,
        version: 1,
        createdAt: now,
        updatedAt: now,
      };
      type Outcome = (CreateResult & { replayed: false; event: StoredEvent }) | { replayOf: string; response: unknown };
      const result = await db.transaction(async (tx): Promise<Outcome> => {
        if (key !== undefined) {
          if (!(await claimKey(tx, user.subject, key))) {
            throw new DomainError(
              'IDEMPOTENCY_KEY_IN_USE',
              'A request with this Idempotency-Key is still being processed; retry after it completes.',
            );
          }
          const previous = await findKey(tx, user.subject, key);
          if (previous) {
            if (previous.fingerprint !== fingerprint(input)) {
              throw new DomainError(
                'IDEMPOTENCY_KEY_REUSED',
                'This Idempotency-Key was already used with a different request; use a new key.',
              );
            }
            return { replayOf: previous.orderId, response: previous.response };
          }
        }
        const items = await insertOrder(tx, order, priced.lines);
        const response = opts.response?.({ order, items }) ?? null;
        if (key !== undefined) {
          await saveKey(tx, user.subject, key, { fingerprint: fingerprint(input), orderId: order.id, response });
        }
        return { replayed: false, order, items, response, event: await appendEvent(tx, 'created', order) };
      });
      if ('replayOf' in result) {
        return { replayed: true, order: await visibleOrder(user, result.replayOf), response: result.response };
      }
      const { event, ...created } = result;
      deps.onEvent(event);
      return created;
    },

    changeStatus,

    cancel(principal: Principal, id: string, opts: WriteOptions = {}) {
      return changeStatus(principal, id, 'cancelled', opts);
    },

    /** Replaces the lines of a pending order (its owner or staff). */
    async replaceItems(
      principal: Principal,
      id: string,
      lines: readonly OrderLineInput[],
      opts: WriteOptions = {},
    ): Promise<{ order: Order; items: OrderItem[] }> {
      const user = requireScope(principal, SCOPES.write);
      const priced = priceLines(lines, await catalogue.prices());
      return writeVisible(user, id, opts, async (order) => {
        if (order.status !== 'pending') {
          throw new DomainError('NOT_EDITABLE', `The order is ${order.status}; only pending orders can be changed.`);
        }
        return withEvent(async (tx) => {
          const replaced = await replaceOrderItems(tx, id, order.version, priced.lines, priced.totalCents);
          return replaced && { value: replaced, event: await appendEvent(tx, 'updated', replaced.order) };
        });
      });
    },

    /** Deletes an order for good: staff only. */
    async remove(principal: Principal, id: string, opts: WriteOptions = {}): Promise<void> {
      const user = requireScope(principal, SCOPES.write);
      await writeVisible(user, id, opts, async (order) => {
        if (!isStaff(user)) throw new DomainError('FORBIDDEN', 'Only staff may delete orders.');
        return withEvent(async (tx) =>
          (await deleteOrder(tx, id, order.version))
            ? { value: true, event: await appendEvent(tx, 'deleted', order) }
            : null,
        );
      });
    },
  };
}

export type OrderService = ReturnType<typeof createOrderService>;
