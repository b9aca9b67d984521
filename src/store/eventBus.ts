import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Database } from './db.js';
import { closeRedis, redisReady, watchConnection } from './redis.js';
import { eventFromJson, eventsAfter, latestEventId, type StoredEvent } from './events.js';

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
 * Fans committed order events out to local listeners. Redis (when configured) carries each event
 * to every replica; the outbox in PostgreSQL is the truth: ids are in commit order, so a jump in
 * ids is filled from the database before anything later is delivered, and a periodic poll picks
 * up whatever a lost message left behind.
 */
export async function createEventBus(deps: {
  db: Database;
  redis?: Redis;
  logger: Logger;
  /** The outbox poll: a safety net under Redis pub/sub, and the only path between replicas without Redis. */
  pollMs?: number;
}): Promise<EventBus> {
  const { db, redis, logger, pollMs = 5_000 } = deps;
  const channel = `orders-api:${db.identity}:events`;
  const listeners = new Set<EventListener>();
  let last = BigInt(await latestEventId(db));
  let queue: Promise<void> = Promise.resolve();

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

  /** One at a time, so delivery order is id order whatever order messages arrive in. */
  function deliver(event: StoredEvent | null) {
    queue = queue
      .then(async () => {
        if (event && BigInt(event.id) <= last) return;
        if (event && BigInt(event.id) === last + 1n) return emit(event);
        await catchUp();
      })
      .catch((err: unknown) => logger.error({ err }, 'event delivery failed; the next poll retries'));
  }

  let subscriber: Redis | undefined;
  if (redis) {
    subscriber = redis.duplicate();
    watchConnection(subscriber, logger, 'subscriber');
    const sub = subscriber;
    // Subscribing on every 'ready' covers a start while Redis was down as well as each reconnection;
    // whatever was published while unsubscribed is then read from the outbox.
    sub.on('ready', () => {
      sub.subscribe(channel).then(
        () => deliver(null),
        (err: unknown) => logger.warn({ err }, 'subscribing to Redis failed; polling until it reconnects'),
      );
    });
    sub.on('message', (_channel: string, message: string) => {
      try {
        deliver(eventFromJson(message));
      } catch (err) {
        // A malformed message is dropped; the outbox still has the event and the poll delivers it.
        logger.warn({ err }, 'ignoring a malformed event message');
        deliver(null);
      }
    });
    await sub.connect().catch(() => undefined);
  }

  const fanOutDegraded = () => Boolean(redis && !(redisReady(redis) && subscriber && redisReady(subscriber)));
  const tickMs = Math.min(pollMs, DEGRADED_POLL_MS);
  let sinceFullPoll = 0;
  const poll = setInterval(() => {
    sinceFullPoll += tickMs;
    if (sinceFullPoll < pollMs && !fanOutDegraded()) return;
    sinceFullPoll = 0;
    deliver(null);
  }, tickMs);
  poll.unref();

  return {
    publish(event) {
      if (redis && redisReady(redis)) {
        redis.publish(channel, JSON.stringify(event)).catch((err: unknown) => {
          logger.warn({ err }, 'publishing an event to Redis failed; replicas catch up by polling');
          deliver(event);
        });
      } else {
        deliver(event);
      }
    },
    listen(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      clearInterval(poll);
      listeners.clear();
      if (subscriber) await closeRedis(subscriber);
      await queue;
    },
  };
}
