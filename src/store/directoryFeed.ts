import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { DirectoryChanges, DirectoryFeed, DirectoryUserState } from '../domain/ports.js';
import type { Queryable } from './db.js';
import type { Database } from './db.js';
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
    role: 'directory subscriber',
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

const StateRow = z.object({
  id: z.string(),
  external_id: z.string().nullable(),
  active: z.boolean(),
  tokens_valid_after: z.string().nullable(),
});

function toUserState(row: unknown): DirectoryUserState {
  const r = StateRow.parse(row);
  return {
    id: r.id,
    key: r.external_id,
    active: r.active,
    tokensValidAfter: r.tokens_valid_after === null ? null : Date.parse(r.tokens_valid_after),
  };
}

/** The last directory revision: a replica that has read every change up to it has nothing to catch up. */
export async function directoryRevision(db: Queryable): Promise<string> {
  const [row] = await db.query(`select revision from directory_state where id = 1`);
  return String((row as { revision: unknown }).revision);
}

/**
 * Users written after `revision` (all of them with `afterRevision` null: then only those that refuse someone), in
 * revision order.
 */
export async function directoryUserStates(db: Queryable, afterRevision: string | null): Promise<DirectoryUserState[]> {
  const rows =
    afterRevision === null
      ? await db.query(
          `select id, external_id, active, tokens_valid_after from directory_users
           where external_id is not null and (not active or tokens_valid_after is not null)`,
        )
      : await db.query(
          // A key that left a user (keepRefusing) is read after that user's row of the same revision.
          `select id, external_id, active, tokens_valid_after from directory_users
           where revision > $1 order by revision, deleted_at is not null`,
          [afterRevision],
        );
  return rows.map(toUserState);
}

/** The directory keys of the staff group's members, or null when the directory has no such group. */
export async function staffKeys(db: Queryable, staffGroup: string): Promise<Set<string> | null> {
  const rows = await db.query(
    `select u.external_id from directory_groups g
     left join directory_members m on m.group_id = g.id
     left join directory_users u on u.id = m.user_id and u.deleted_at is null
     where lower(g.display_name) = lower($1)`,
    [staffGroup],
  );
  if (!rows.length) return null;
  const keys = new Set<string>();
  for (const row of rows) {
    const key = (row as { external_id: string | null }).external_id;
    if (key !== null) keys.add(key);
  }
  return keys;
}
