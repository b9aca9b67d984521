import type { Database } from '../store/db.js';
import { customersByIds } from '../store/customers.js';
import { findOrder, insertOrder, listOrders, updateOrderStatus, type OrderCursor } from '../store/orders.js';
import type { Catalogue } from './catalogue.js';
import type { CustomerService } from './customers.js';
import { DomainError, invalidInput, notFound } from './errors.js';
import { ID_PATTERN, newId } from './ids.js';
import type { Loaders } from './loaders.js';
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

export function createOrderService(deps: { db: Database; catalogue: Catalogue; customers: CustomerService }) {
  const { db, catalogue, customers } = deps;

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

  async function changeStatus(
    principal: Principal,
    id: string,
    status: string,
    opts: { expectedVersion?: number } = {},
  ): Promise<Order> {
    const user = requireScope(principal, SCOPES.write);
    if (!isOrderStatus(status)) assertTransition('pending', status);
    for (let attempt = 1; ; attempt++) {
      const order = await visibleOrder(user, id);
      if (!order) throw notFound('Order');
      if (opts.expectedVersion !== undefined && opts.expectedVersion !== order.version) {
        throw new DomainError('PRECONDITION_FAILED', 'The order has changed since the version you sent.');
      }
      if (!isStaff(user) && !(status === 'cancelled' && order.status === 'pending')) {
        throw new DomainError('FORBIDDEN', 'Customers may only cancel their own pending orders.');
      }
      assertTransition(order.status, status);
      const updated = await updateOrderStatus(db, id, status as OrderStatus, order.version);
      if (updated) return updated;
      if (opts.expectedVersion !== undefined) {
        throw new DomainError('PRECONDITION_FAILED', 'The order has changed since the version you sent.');
      }
      if (attempt >= MAX_WRITE_ATTEMPTS) {
        throw new DomainError('PRECONDITION_FAILED', 'The order kept changing; read it again and retry.');
      }
    }
  }

  return {
    async get(principal: Principal, id: string): Promise<Order | null> {
      return visibleOrder(requireScope(principal, SCOPES.read), id);
    },

    /** Newest first: every order for staff, a customer's own otherwise. */
    async recent(principal: Principal, first?: number | null): Promise<Order[]> {
      const user = requireScope(principal, SCOPES.read);
      const limit = clampFirst(first);
      if (limit === 0) return [];
      return listOrders(db, isStaff(user) ? { limit } : { customerId: await customers.idFor(user), limit });
    },

    /** One page of the newest-first list, plus whether more follow. */
    async page(
      principal: Principal,
      opts: { limit: number; after?: OrderCursor },
    ): Promise<{ orders: Order[]; hasMore: boolean }> {
      const user = requireScope(principal, SCOPES.read);
      const limit = Math.min(Math.max(1, opts.limit), PAGE.max);
      const rows = await listOrders(db, {
        limit: limit + 1,
        ...(opts.after ? { after: opts.after } : {}),
        ...(isStaff(user) ? {} : { customerId: await customers.idFor(user) }),
      });
      return { orders: rows.slice(0, limit), hasMore: rows.length > limit };
    },

    /** A customer's newest orders, for staff or for that customer. */
    async ofCustomer(principal: Principal, customerId: string, first: number | null | undefined, loaders: Loaders) {
      const user = requireScope(principal, SCOPES.read);
      if (!isStaff(user) && customerId !== (await customers.idFor(user))) return [];
      const limit = clampFirst(first);
      return limit === 0 ? [] : loaders.customerOrders.load({ customerId, first: limit });
    },

    async create(principal: Principal, input: CreateOrderInput): Promise<{ order: Order; items: OrderItem[] }> {
      const user = requireScope(principal, SCOPES.write);
      const named = input.customerId ?? undefined;
      let customerId: string;
      if (named === undefined) {
        customerId = await customers.idFor(user);
      } else if (isStaff(user)) {
        const [found] = ID_PATTERN.test(named) ? await customersByIds(db, [named]) : [];
        if (!found) throw invalidInput([{ pointer: '/customer_id', reason: 'no such customer' }]);
        customerId = found.id;
      } else if (named === (await customers.idFor(user))) {
        customerId = named;
      } else {
        throw new DomainError('FORBIDDEN', 'Customers may only place orders for themselves.');
      }
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
      const items = await db.transaction((tx) => insertOrder(tx, order, priced.lines));
      return { order, items };
    },

    changeStatus,

    cancel(principal: Principal, id: string, opts: { expectedVersion?: number } = {}) {
      return changeStatus(principal, id, 'cancelled', opts);
    },
  };
}

export type OrderService = ReturnType<typeof createOrderService>;
