import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { DirectoryChanges, DirectoryFeed } from '../domain/ports.js';
import type { Database } from './db.js';
import { directoryRevision, directoryUserStates, staffKeys } from './directory.js';
import { closeRedis, redisReady, watchConnection } from './redis.js';

/**
 * Without Redis (or while it is down) replicas hear of a directory change only by reading the database: this often,
 * so that a deactivation reaches every replica within a second.
 */
export const DIRECTORY_POLL_MS = 500;
/** With Redis, changes are pushed; this slower poll is only the safety net under a lost message. */
const SAFETY_POLL_MS = 5_000;

/**
 * Carries directory changes to every replica's access rules. The database is the truth: `directory_state.revision`
 * grows with each directory write, in commit order, so a replica reads whatever it has not seen with one indexed
 * query. Redis (when configured) pushes a nudge to every replica the moment a write commits; the poll catches up
 * after a lost message, and is the only path without Redis.
 */
export async function createDirectoryFeed(deps: {
  db: Database;
  redis?: Redis;
  logger: Logger;
  /** SCIM_STAFF_GROUP: the group whose members' keys the access rules get. */
  staffGroup: string;
  /** Receives the whole state once, before this resolves, then every change. */
  onChanges: (changes: DirectoryChanges) => void;
}): Promise<DirectoryFeed & { close(): Promise<void> }> {
  const { db, redis, logger, staffGroup, onChanges } = deps;
  const channel = `orders-api:${db.identity}:directory`;

  let seen = BigInt(await directoryRevision(db));
  onChanges({ full: true, users: await directoryUserStates(db, null), staff: await staffKeys(db, staffGroup) });

  async function catchUp(): Promise<void> {
    const revision = BigInt(await directoryRevision(db));
    if (revision <= seen) return;
    // Reading after the revision may see writes past it; they are read again next time, which changes nothing.
    const users = await directoryUserStates(db, seen.toString());
    const staff = await staffKeys(db, staffGroup);
    seen = revision;
    onChanges({ full: false, users, staff });
  }

  // One catch-up at a time; calls that arrive while one waits to start share it.
  let tail: Promise<void> = Promise.resolve();
  let waiting: Promise<void> | null = null;
  function refresh(): Promise<void> {
    if (waiting) return waiting;
    const next = tail.then(() => {
      waiting = null;
      return catchUp();
    });
    waiting = next;
    tail = next.catch((err: unknown) => logger.warn({ err }, 'reading directory changes failed; retrying'));
    return next;
  }

  let subscriber: Redis | undefined;
  if (redis) {
    subscriber = redis.duplicate();
    watchConnection(subscriber, logger, 'directory subscriber');
    const sub = subscriber;
    // Subscribing on every 'ready' covers a start while Redis was down and each reconnection; what was missed
    // meanwhile is read from the database at once.
    sub.on('ready', () => {
      sub.subscribe(channel).then(
        () => void refresh().catch(() => undefined),
        (err: unknown) => logger.warn({ err }, 'cannot listen for directory changes; polling'),
      );
    });
    sub.on('message', () => void refresh().catch(() => undefined));
    await sub.connect().catch(() => undefined);
  }

  const pushed = () => Boolean(redis && subscriber && redisReady(redis) && redisReady(subscriber));
  let sinceSafetyPoll = 0;
  const poll = setInterval(() => {
    sinceSafetyPoll += DIRECTORY_POLL_MS;
    if (pushed() && sinceSafetyPoll < SAFETY_POLL_MS) return;
    sinceSafetyPoll = 0;
    void refresh().catch(() => undefined);
  }, DIRECTORY_POLL_MS);
  poll.unref();

  return {
    async announce() {
      if (redis && redisReady(redis)) {
        redis.publish(channel, 'changed').catch((err: unknown) => {
          logger.warn({ err }, 'publishing a directory change failed; replicas read it by polling');
        });
      }
      // The write has committed: a failure to read it back is the poll's to retry, not the writer's to report.
      await refresh().catch(() => undefined);
    },
    async close() {
      clearInterval(poll);
      if (subscriber) await closeRedis(subscriber);
      await tail;
    },
  };
}
