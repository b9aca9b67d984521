import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { DirectoryChanges, DirectoryFeed } from '../domain/ports.js';
import type { Database } from './db.js';
import { directoryRevision, directoryUserStates, staffKeys } from './directory.js';
import { createNudgedPoll } from './nudgedPoll.js';

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
 * after a lost message, and is the only path without Redis (the one change feed: nudgedPoll.ts).
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

  const feed = await createNudgedPoll({
    ...(redis ? { redis } : {}),
    logger,
    channel: `orders-api:${db.identity}:directory`,
    what: 'directory changes',
    poll: { withoutRedisMs: DIRECTORY_POLL_MS, redisDownMs: DIRECTORY_POLL_MS, redisUpMs: SAFETY_POLL_MS },
    // A message only says that something changed: the database says what.
    catchUp: () => catchUp(),
  });

  return {
    async announce() {
      void feed.tell('changed');
      // The write has committed: a failure to read it back is the poll's to retry, not the writer's to report.
      await feed.wake().catch(() => undefined);
    },
    close: () => feed.close(),
  };
}
