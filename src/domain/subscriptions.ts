import type { CustomerService } from './customers.js';
import { notFound } from './errors.js';
import { canSeeEvent } from './events.js';
import type { EventKind, OrderEvent } from './model.js';
import type { OrderService } from './orderService.js';
import type { EventChannel, EventRepository } from './ports.js';
import { isStaff, requireScope, SCOPES, type Principal, type User } from './policy.js';

/**
 * The events one audience may see for one filter. Subscribers with equal keys see exactly the same events: the key
 * names the audience (staff see every order, a customer only their own) and the filter.
 */
export interface OrderFeed {
  readonly key: string;
  /** Calls `onEvent` with each committed event of the feed, once, in id order; returns how to stop. */
  listen(onEvent: (event: OrderEvent) => void): () => void;
  /**
   * The feed resumed after an event id (SSE Last-Event-ID): the events of the feed missed since, from the outbox,
   * oldest first, then `live` (which must have started listening first) without anything already replayed.
   */
  resume(after: string, live: AsyncIterableIterator<OrderEvent>): AsyncIterableIterator<OrderEvent>;
}

const REPLAY_PAGE = 200;

/** Who sees which order events: the one visibility rule of every feed (subscriptions, webhook endpoints). */
export interface Audience {
  /** Names the audience: callers with equal keys see exactly the same events. */
  readonly key: string;
  sees(event: OrderEvent): boolean;
}

/** The rule for reads: staff see every order's events, a customer those of their own orders. */
export function audienceOf(user: User, ownCustomerId: string): Audience {
  return {
    key: isStaff(user) ? 'staff' : `customer:${ownCustomerId}`,
    sees: (event) => canSeeEvent(user, ownCustomerId, event),
  };
}

/** Missed events from the outbox, oldest first, then the live stream without anything already replayed. */
async function* resumed(
  outbox: EventRepository,
  after: string,
  wanted: (event: OrderEvent) => boolean,
  live: AsyncIterableIterator<OrderEvent>,
): AsyncGenerator<OrderEvent> {
  let last = BigInt(after);
  try {
    for (;;) {
      const page = await outbox.after(last.toString(), REPLAY_PAGE);
      for (const event of page) {
        last = BigInt(event.id);
        if (wanted(event)) yield event;
      }
      if (page.length < REPLAY_PAGE) break;
    }
    for await (const event of live) if (BigInt(event.id) > last) yield event;
  } finally {
    await live.return?.();
  }
}

export function createSubscriptionService(deps: {
  outbox: EventRepository;
  bus: EventChannel;
  customers: CustomerService;
  orders: OrderService;
}) {
  return {
    /**
     * The committed order events the caller may see, for a filter. The visibility rule is the one for reads: staff
     * see all, a customer only events about their own orders. How the events reach the subscriber (buffered, shared
     * with others, ended when its credential expires) is its transport's business (http/realtime/subscribe.ts).
     */
    async orderFeed(
      principal: Principal,
      filter: { kinds: readonly EventKind[]; orderId?: string | null },
    ): Promise<OrderFeed> {
      const user = requireScope(principal, SCOPES.read);
      if (filter.orderId && !(await deps.orders.get(principal, filter.orderId))) throw notFound('Order');
      const audience = audienceOf(user, await deps.customers.idFor(user));
      const wanted = (event: OrderEvent) =>
        filter.kinds.includes(event.kind) &&
        (!filter.orderId || event.order.id === filter.orderId) &&
        audience.sees(event);
      return {
        key: JSON.stringify([audience.key, filter.kinds, filter.orderId ?? null]),
        listen: (onEvent) =>
          deps.bus.listen((event) => {
            if (wanted(event)) onEvent(event);
          }),
        resume: (after, live) => resumed(deps.outbox, after, wanted, live),
      };
    },
  };
}

export type SubscriptionService = ReturnType<typeof createSubscriptionService>;
