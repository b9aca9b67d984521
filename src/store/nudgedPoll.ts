import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { closeRedis, redisReady, watchConnection } from './redis.js';

/** How often a feed reads the database, by the state of its push path. */
export interface PollIntervals {
  /** No Redis configured: the poll is the only path between replicas. */
  readonly withoutRedisMs: number;
  /** Redis configured but down (or not subscribed): the poll stands in for it until it is back. */
  readonly redisDownMs: number;
  /** Redis pushing: the poll is only the safety net under a lost message. */
  readonly redisUpMs: number;
}

export interface NudgedPoll {
  /**
   * Runs a catch-up after those already queued, one at a time. `message` is what a replica pushed, when there is one;
   * a wake without one shares a catch-up that is queued and not started yet (it will read everything anyway).
   */
  wake(message?: string | null): Promise<void>;
  /** Pushes `message` to every replica's feed over Redis; false (logged when it failed) when Redis did not take it. */
  tell(message: string): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * A change feed whose truth is the database and whose speed is Redis: the one pattern under the order events and the
 * directory. It subscribes to its channel on every 'ready' (a start while Redis was down, and each reconnection) and
 * catches up at once, since what was published meanwhile is lost to it; every message pushed wakes it; a poll reads
 * the database as often as the push path's state asks; and catch-ups run one at a time, in the order they were asked.
 */
export async function createNudgedPoll(deps: {
  redis?: Redis;
  logger: Logger;
  /** The Redis channel, named after the shared database so that other deployments are never heard. */
  channel: string;
  /** What the feed carries, for its log lines ("order events", "directory changes"). */
  what: string;
  /** Its Redis connection's role in the connection log lines (operators and tests read them). */
  role: string;
  poll: PollIntervals;
  /** Reads and hands on what this replica has not seen yet. */
  catchUp: (message: string | null) => Promise<void>;
}): Promise<NudgedPoll> {
  const { redis, logger, channel, what, role, poll, catchUp } = deps;

  let tail: Promise<void> = Promise.resolve();
  let waiting: Promise<void> | null = null;
  function wake(message: string | null = null): Promise<void> {
    if (message === null && waiting) return waiting;
    const next = tail.then(() => {
      if (message === null) waiting = null;
      return catchUp(message);
    });
    if (message === null) waiting = next;
    tail = next.catch((err: unknown) => logger.warn({ err }, `reading ${what} failed; the next poll retries`));
    return next;
  }
  const nudge = (message: string | null) => void wake(message).catch(() => undefined);

  let subscriber: Redis | undefined;
  if (redis) {
    subscriber = redis.duplicate();
    watchConnection(subscriber, logger, role);
    const sub = subscriber;
    sub.on('ready', () => {
      sub.subscribe(channel).then(
        () => nudge(null),
        (err: unknown) => logger.warn({ err }, `cannot listen for ${what} on Redis; polling until it reconnects`),
      );
    });
    sub.on('message', (_channel: string, message: string) => nudge(message));
    await sub.connect().catch(() => undefined);
  }

  const pushed = () => Boolean(redis && subscriber && redisReady(redis) && redisReady(subscriber));
  const intervalMs = () => (!redis ? poll.withoutRedisMs : pushed() ? poll.redisUpMs : poll.redisDownMs);
  const tickMs = Math.min(poll.withoutRedisMs, poll.redisDownMs, poll.redisUpMs);
  let sincePoll = 0;
  const timer = setInterval(() => {
    sincePoll += tickMs;
    if (sincePoll < intervalMs()) return;
    sincePoll = 0;
    nudge(null);
  }, tickMs);
  timer.unref();

  return {
    wake,
    async tell(message) {
      if (!redis || !redisReady(redis)) return false;
      try {
        await redis.publish(channel, message);
        return true;
      } catch (err) {
        logger.warn({ err }, `publishing ${what} to Redis failed; replicas catch up by polling`);
        return false;
      }
    },
    async close() {
      clearInterval(timer);
      if (subscriber) await closeRedis(subscriber);
      await tail;
    },
  };
}
