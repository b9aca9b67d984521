import { createHash } from 'node:crypto';
import type { Catalogue } from './catalogue.js';
import type { CustomerService } from './customers.js';
import { DomainError, invalidInput, notFound, preconditionFailed } from './errors.js';
import { failedCondition, orderEtag, type Precondition } from './etags.js';
import type { EventSink } from './events.js';
import { ID_PATTERN, newId } from './ids.js';
import { groupBy, type Loaders } from './loaders.js';
import type { Order, OrderEvent, OrderLineInput, OrderStatus, OrderWithItems } from './model.js';
import { createOrderListing } from './orderListing.js';
import { assertTransition, isOrderStatus, priceLines } from './orders.js';
import type { Repositories, Storage } from './ports.js';
import { isStaff, requireScope, requireStepUp, SCOPES, type Principal, type StepUpRule, type User } from './policy.js';

/** How many orders one list returns: `first`/`limit` unset means the default, above the maximum means the maximum. */
export const PAGE = { default: 20, max: 100 } as const;

/** Lost compare-and-set races (without a client precondition) are retried this often. */
const MAX_WRITE_ATTEMPTS = 3;

export interface CreateOrderInput {
  readonly customerId?: string | null;
  readonly items: readonly OrderLineInput[];
}

export interface WriteOptions {
  readonly precondition?: Precondition;
}

/**
 * What a create answers. A repeat of an earlier request under the same idempotency key is `replayed`, with the
 * order and lines as that first request created them, whatever has happened to the order since.
 */
export interface CreateResult extends OrderWithItems {
  readonly replayed: boolean;
}

/** One page of the newest-first list. */
export interface OrderPage {
  readonly orders: Order[];
  /** More orders follow the last one. */
  readonly hasMore: boolean;
  /** The page size applied, after the default and the maximum. */
  readonly limit: number;
}

/** A JSON merge patch of an order: only the status may change. */
export interface OrderPatch {
  readonly status?: string;
}

function fingerprint(input: CreateOrderInput): string {
  const canonical = JSON.stringify({
    customerId: input.customerId ?? null,
    items: input.items.map((i) => ({ sku: i.sku, qty: i.qty })),
  });
  return createHash('sha256').update(canonical).digest('base64url');
}

/** The one rule for how many orders a list returns. */
/** The client's conditions on the order as it is now: PRECONDITION_FAILED, saying which one, when one fails. */
function requirePrecondition(precondition: Precondition | undefined, order: Order): void {
  const failed = failedCondition(precondition, orderEtag(order));
  if (failed) throw preconditionFailed(failed);
}

function pageSize(first: number | null | undefined, pointer: string): number {
  if (first === null || first === undefined) return PAGE.default;
  if (!Number.isInteger(first) || first < 0) {
    throw invalidInput([{ pointer, reason: 'must be a non-negative integer' }]);
  }
  return Math.min(first, PAGE.max);
}

export function createOrderService(deps: {
  storage: Storage;
  catalogue: Catalogue;
  customers: CustomerService;
  /** Told of each change after its transaction commits: the one place events leave the domain. */
  onEvent: EventSink;
  /** What the staff role's writes ask of the caller's sign-in (RFC 9470); null when the rule is off. */
  stepUp: StepUpRule | null;
}) {
  const { storage, catalogue, customers, stepUp } = deps;

  /** Runs a write and its event in one transaction, then publishes the event once committed. */
  async function withEvent<T>(
    work: (tx: Repositories) => Promise<{ value: T; event: OrderEvent } | null>,
  ): Promise<T | null> {
    const done = await storage.transaction(work);
    if (!done) return null;
    deps.onEvent(done.event);
    return done.value;
  }

  /** Someone else's order is reported exactly like a missing one. */
  async function visibleOrder(user: User, id: string): Promise<Order | null> {
    if (!ID_PATTERN.test(id)) return null;
    const order = await storage.orders.find(id);
    if (!order || isStaff(user)) return order;
    return order.customerId === (await customers.idFor(user)) ? order : null;
  }

  async function withItems(orders: readonly Order[]): Promise<OrderWithItems[]> {
    if (!orders.length) return [];
    const items = groupBy(await storage.orders.itemsOf(orders.map((o) => o.id)), (i) => i.orderId);
    return orders.map((order) => ({ order, items: items.get(order.id) ?? [] }));
  }

  /**
   * Whether the caller may make this change as the order's customer: to their own order, and only what
   * `asCustomer` allows. Anything else is the staff role's power (FORBIDDEN without it), and staff use it
   * only after a recent, strong sign-in (the step-up rule).
   */
  async function authorizeChange(user: User, order: Order, asCustomer: boolean, forbidden: string): Promise<void> {
    if (asCustomer && order.customerId === (await customers.idFor(user))) return;
    if (!isStaff(user)) throw new DomainError('FORBIDDEN', forbidden);
    requireStepUp(user, stepUp);
  }

  /**
   * Every change to an existing order: find it (if visible), check the client's precondition, `authorize` the change
   * against the order as it is, then `attempt` the write as a compare-and-set on the version read. A lost race
   * re-reads and re-checks, so a stale precondition ends in PRECONDITION_FAILED and never overwrites the winner.
   */
  async function writeVisible<T>(
    user: User,
    id: string,
    opts: WriteOptions,
    authorize: (order: Order) => Promise<void>,
    attempt: (order: Order) => Promise<T | null>,
  ): Promise<T> {
    for (let n = 1; ; n++) {
      const order = await visibleOrder(user, id);
      if (!order) throw notFound('Order');
      requirePrecondition(opts.precondition, order);
      await authorize(order);
      const result = await attempt(order);
      if (result !== null) return result;
      if (n >= MAX_WRITE_ATTEMPTS) {
        throw new DomainError('PRECONDITION_FAILED', 'The order kept changing; read it again and retry.');
      }
    }
  }

  async function changeStatus(
    principal: Principal,
    id: string,
    status: string,
    opts: WriteOptions = {},
  ): Promise<Order> {
    const user = requireScope(principal, SCOPES.write);
    if (!isOrderStatus(status)) assertTransition('pending', status);
    const authorize = (order: Order) =>
      authorizeChange(
        user,
        order,
        status === 'cancelled' && order.status === 'pending',
        'Customers may only cancel their own pending orders.',
      );
    return writeVisible(user, id, opts, authorize, async (order) => {
      assertTransition(order.status, status);
      return withEvent(async (tx) => {
        const updated = await tx.orders.updateStatus(id, status as OrderStatus, order.version);
        return updated && { value: updated, event: await tx.events.append('updated', updated) };
      });
    });
  }

  async function resolveCustomer(user: User, named: string | null | undefined): Promise<string> {
    if (named === undefined || named === null) return customers.idFor(user);
    if (named === (await customers.idFor(user))) return named;
    if (!isStaff(user)) throw new DomainError('FORBIDDEN', 'Customers may only place orders for themselves.');
    const [found] = ID_PATTERN.test(named) ? await storage.customers.byIds([named]) : [];
    if (!found) throw invalidInput([{ pointer: '/customer_id', reason: 'no such customer' }]);
    requireStepUp(user, stepUp);
    return found.id;
  }

  return {
    async get(principal: Principal, id: string): Promise<Order | null> {
      return visibleOrder(requireScope(principal, SCOPES.read), id);
    },

    /** An order with its lines, or null when it is not visible. */
    async getWithItems(principal: Principal, id: string): Promise<OrderWithItems | null> {
      const order = await visibleOrder(requireScope(principal, SCOPES.read), id);
      return order ? { order, items: await storage.orders.itemsOf([order.id]) } : null;
    },

    /**
     * Newest first: every order for staff, a customer's own otherwise. `first` unset is 20, above 100 is 100,
     * negative is invalid (recentOrders; paged lists are orderListing's connections).
     */
    async list(principal: Principal, opts: { readonly first?: number | null } = {}): Promise<OrderPage> {
      const user = requireScope(principal, SCOPES.read);
      const limit = pageSize(opts.first, '/first');
      if (limit === 0) return { orders: [], hasMore: false, limit };
      const rows = await storage.orders.list({
        limit: limit + 1,
        ...(isStaff(user) ? {} : { customerId: await customers.idFor(user) }),
      });
      return { orders: rows.slice(0, limit), hasMore: rows.length > limit, limit };
    },

    /** The lines of orders the domain has already let the caller see, in one read. */
    withItems,

    ...createOrderListing({ orders: storage.orders, customers }),

    /** A customer's newest orders, for staff or for that customer. */
    async ofCustomer(principal: Principal, customerId: string, first: number | null | undefined, loaders: Loaders) {
      const user = requireScope(principal, SCOPES.read);
      if (!isStaff(user) && customerId !== (await customers.idFor(user))) return [];
      const limit = pageSize(first, '/first');
      return limit === 0 ? [] : loaders.customerOrders.load({ customerId, first: limit });
    },

    /**
     * Places an order. With an idempotency key, the key record is written in the same transaction
     * as the order, so a crash leaves neither; a repeat of the same request replays the first
     * result, a different request under the key is refused, and so is a repeat while the first
     * is still in flight.
     */
    async create(
      principal: Principal,
      input: CreateOrderInput,
      opts: { readonly idempotencyKey?: string } = {},
    ): Promise<CreateResult> {
      const user = requireScope(principal, SCOPES.write);
      const key = opts.idempotencyKey;
      const customerId = await resolveCustomer(user, input.customerId);
      const priced = priceLines(input.items, await catalogue.prices());
      const now = new Date();
      const order: Order = {
        id: newId('ord', now.getTime()),
        customerId,
        status: 'pending',
        totalCents: priced.totalCents,
        version: 1,
        createdAt: now.toISOString(),
        updatedAt: now.toISOString(),
      };
      type Outcome =
        { created: OrderWithItems; event: OrderEvent } | { replayOf: string; first: OrderWithItems | null };
      const result = await storage.transaction(async (tx): Promise<Outcome> => {
        if (key !== undefined) {
          if (!(await tx.idempotency.claim(user.subject, key))) {
            throw new DomainError(
              'IDEMPOTENCY_KEY_IN_USE',
              'A request with this Idempotency-Key is still being processed; retry after it completes.',
            );
          }
          const previous = await tx.idempotency.find(user.subject, key);
          if (previous) {
            if (previous.fingerprint !== fingerprint(input)) {
              throw new DomainError(
                'IDEMPOTENCY_KEY_REUSED',
                'This Idempotency-Key was already used with a different request; use a new key.',
              );
            }
            return { replayOf: previous.orderId, first: previous.created };
          }
        }
        const created = { order, items: await tx.orders.insert(order, priced.lines) };
        if (key !== undefined) {
          await tx.idempotency.save(user.subject, key, { fingerprint: fingerprint(input), orderId: order.id, created });
        }
        return { created, event: await tx.events.append('created', order) };
      });
      if ('created' in result) {
        deps.onEvent(result.event);
        return { replayed: false, ...result.created };
      }
      if (result.first) return { replayed: true, ...result.first };
      // A record kept without what it created answers with the order as it is now, if it still exists.
      const current = await visibleOrder(user, result.replayOf);
      if (!current) throw new DomainError('NOT_FOUND', 'The order created with this key no longer exists.');
      return { replayed: true, order: current, items: await storage.orders.itemsOf([current.id]) };
    },

    changeStatus,

    cancel(principal: Principal, id: string, opts: WriteOptions = {}) {
      return changeStatus(principal, id, 'cancelled', opts);
    },

    /**
     * Applies a merge patch under a precondition. An empty patch changes nothing, but its precondition
     * still holds or fails, and it answers with the order as it is.
     */
    async patch(principal: Principal, id: string, patch: OrderPatch, opts: WriteOptions = {}): Promise<OrderWithItems> {
      if (patch.status !== undefined) {
        const [changed] = await withItems([await changeStatus(principal, id, patch.status, opts)]);
        return changed!;
      }
      // Nothing is written, so reading is all it needs.
      const order = await visibleOrder(requireScope(principal, SCOPES.read), id);
      if (!order) throw notFound('Order');
      requirePrecondition(opts.precondition, order);
      return { order, items: await storage.orders.itemsOf([order.id]) };
    },

    /** Replaces the lines of a pending order (its owner or staff). */
    async replaceItems(
      principal: Principal,
      id: string,
      lines: readonly OrderLineInput[],
      opts: WriteOptions = {},
    ): Promise<OrderWithItems> {
      const user = requireScope(principal, SCOPES.write);
      const priced = priceLines(lines, await catalogue.prices());
      const authorize = (order: Order) =>
        authorizeChange(user, order, true, 'Customers may only change their own orders.');
      return writeVisible(user, id, opts, authorize, async (order) => {
        if (order.status !== 'pending') {
          throw new DomainError('NOT_EDITABLE', `The order is ${order.status}; only pending orders can be changed.`);
        }
        return withEvent(async (tx) => {
          const replaced = await tx.orders.replaceItems(id, order.version, priced.lines, priced.totalCents);
          return replaced && { value: replaced, event: await tx.events.append('updated', replaced.order) };
        });
      });
    },

    /** Deletes an order for good: staff only. */
    async remove(principal: Principal, id: string, opts: WriteOptions = {}): Promise<void> {
      const user = requireScope(principal, SCOPES.write);
      const authorize = (order: Order) => authorizeChange(user, order, false, 'Only staff may delete orders.');
      await writeVisible(user, id, opts, authorize, async (order) =>
        withEvent(async (tx) =>
          (await tx.orders.delete(id, order.version))
            ? { value: true, event: await tx.events.append('deleted', order) }
            : null,
        ),
      );
    },
  };
}

export type OrderService = ReturnType<typeof createOrderService>;
