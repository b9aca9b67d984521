import type { CustomerService } from './customers.js';
import { notFound } from './errors.js';
import { canSeeEvent } from './events.js';
import type { EventKind, OrderEvent } from './model.js';
import type { OrderService } from './orderService.js';
import type { EventChannel, EventRepository } from './ports.js';
import { requireScope, SCOPES, type Principal } from './policy.js';

/** Events a subscriber may have waiting before it counts as too slow and is dropped. */
export const SUBSCRIBER_BUFFER = 256;

export type StreamEnd = 'overflow' | 'expired';

export interface StreamOptions {
  /** The subscriber must be cut off; the transport closes its connection with this reason. */
  readonly onEnd: (why: StreamEnd, message: string) => void;
  /** When the credential behind the subscription stops being valid (ms since the epoch). */
  readonly expiresAt?: number;
  /** Resume after this event id (SSE Last-Event-ID): missed events first, then live ones. */
  readonly after?: string;
}

const REPLAY_PAGE = 200;

/** A pull-based queue over pushed events: bounded, so one slow consumer cannot hold memory hostage. */
export function boundedStream<T>(max: number, onOverflow: () => void, onClose: () => void) {
  const buffer: T[] = [];
  let waiting: ((result: IteratorResult<T>) => void) | null = null;
  let closed = false;

  const close = () => {
    if (closed) return;
    closed = true;
    buffer.length = 0;
    onClose();
    waiting?.({ value: undefined, done: true });
    waiting = null;
  };

  const iterator: AsyncIterableIterator<T> = {
    next() {
      if (buffer.length) return Promise.resolve({ value: buffer.shift()!, done: false });
      if (closed) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve) => (waiting = resolve));
    },
    return() {
      close();
      return Promise.resolve({ value: undefined, done: true });
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };

  return {
    iterator,
    close,
    push(value: T) {
      if (closed) return;
      if (waiting) {
        const resolve = waiting;
        waiting = null;
        resolve({ value, done: false });
      } else if (buffer.length < max) {
        buffer.push(value);
      } else {
        close();
        onOverflow();
      }
    },
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
     * Committed order events the caller may see, as they happen. The visibility rule is the one
     * for reads: staff see all, a customer only events about their own orders.
     */
    async orderEvents(
      principal: Principal,
      filter: { kinds: readonly EventKind[]; orderId?: string | null },
      opts: StreamOptions,
    ): Promise<AsyncIterableIterator<OrderEvent>> {
      const user = requireScope(principal, SCOPES.read);
      if (filter.orderId && !(await deps.orders.get(principal, filter.orderId))) throw notFound('Order');
      const own = await deps.customers.idFor(user);
      let expiry: NodeJS.Timeout | undefined;
      let unlisten = () => {};
      const stream = boundedStream<OrderEvent>(
        SUBSCRIBER_BUFFER,
        () => opts.onEnd('overflow', `More than ${SUBSCRIBER_BUFFER} events were waiting: the subscriber is too slow.`),
        () => {
          unlisten();
          clearTimeout(expiry);
        },
      );
      const wanted = (event: OrderEvent) =>
        filter.kinds.includes(event.kind) &&
        (!filter.orderId || event.order.id === filter.orderId) &&
        canSeeEvent(user, own, event);
      // Listening starts before any replay is read, so no event can fall between the two.
      unlisten = deps.bus.listen((event) => {
        if (wanted(event)) stream.push(event);
      });
      if (opts.expiresAt !== undefined) {
        expiry = setTimeout(
          () => {
            stream.close();
            opts.onEnd('expired', 'The access token has expired.');
          },
          // setTimeout fires at once for delays past 2^31-1 ms; no token lives that long anyway.
          Math.min(Math.max(0, opts.expiresAt - Date.now()), 2 ** 31 - 1),
        );
        expiry.unref();
      }
      if (opts.after === undefined) return stream.iterator;
      return resumed(deps.outbox, opts.after, wanted, stream.iterator);
    },
  };
}

export type SubscriptionService = ReturnType<typeof createSubscriptionService>;
