import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Database } from './db.js';
import { eventFromJson, eventsAfter, latestEventId, type StoredEvent } from './events.js';
import { createNudgedPoll } from './nudgedPoll.js';

/** While configured Redis is down, polling is the path between replicas, so it runs at least this often. */
const DEGRADED_POLL_MS = 1_000;
const CATCH_UP_PAGE = 500;

export type EventListener = (event: StoredEvent) => void;

export interface EventBus {
  /** The domain's sink: an event whose transaction has committed. */
  publish(event: StoredEvent): void;
  /** Every committed event, once, in id order, from this process or any replica. */
  listen(listener: EventListener): () => void;
  close(): Promise<void>;
}

/**
 * Fans committed order events out to local listeners, over the one change feed (nudgedPoll.ts). Redis (when
 * configured) carries each event to every replica; the outbox in PostgreSQL is the truth: ids are in commit order, so
 * a jump in ids is filled from the database before anything later is delivered, and the poll picks up whatever a lost
 * message left behind.
 */
export async function createEventBus(deps: {
  db: Database;
  redis?: Redis;
  logger: Logger;
  /** The outbox poll: a safety net under Redis pub/sub, and the only path between replicas without Redis. */
  pollMs?: number;
}): Promise<EventBus> {
  const { db, redis, logger, pollMs = 5_000 } = deps;
  const listeners = new Set<EventListener>();
  let last = BigInt(await latestEventId(db));

  function emit(event: StoredEvent) {
    last = BigInt(event.id);
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (err) {
        logger.error({ err }, 'event listener failed');
      }
    }
  }

  async function catchUp() {
    for (;;) {
      const page = await eventsAfter(db, last.toString(), CATCH_UP_PAGE);
      for (const event of page) if (BigInt(event.id) > last) emit(event);
      if (page.length < CATCH_UP_PAGE) return;
    }
  }

  /** Delivery order is id order whatever order messages arrive in: the feed runs one step at a time. */
  async function step(message: string | null) {
    let event: StoredEvent | null = null;
    if (message !== null) {
      try {
        event = eventFromJson(message);
      } catch (err) {
        // A malformed message is dropped; the outbox still has the event and a catch-up delivers it.
        logger.warn({ err }, 'ignoring a malformed event message');
      }
    }
    if (event && BigInt(event.id) <= last) return;
    if (event && BigInt(event.id) === last + 1n) return emit(event);
    await catchUp();
  }

  const feed = await createNudgedPoll({
    ...(redis ? { redis } : {}),
    logger,
    channel: `orders-api:${db.identity}:events`,
    what: 'order events',
    role: 'subscriber',
    poll: { withoutRedisMs: pollMs, redisDownMs: Math.min(pollMs, DEGRADED_POLL_MS), redisUpMs: pollMs },
    catchUp: step,
  });

  return {
    publish(event) {
      // Redis brings it back to this replica too; without Redis (or when it fails) it is delivered here at once.
      const message = JSON.stringify(event);
      void feed.tell(message).then(async (told) => {
        if (!told) await feed.wake(message).catch(() => undefined);
      });
    },
    listen(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      listeners.clear();
      await feed.close();
    },
  };
}
