import type { Database } from './db.js';
import { CORE_MIGRATIONS } from './migrations/core.js';
import { DIRECTORY_MIGRATIONS } from './migrations/directory.js';
import type { Migration } from './migrations/migration.js';
import { ORDER_LISTING_MIGRATIONS } from './migrations/orderListing.js';
import { STEP_UP_MIGRATIONS } from './migrations/stepUp.js';
import { TRACING_MIGRATIONS } from './migrations/tracing.js';
import { WEBHOOK_MIGRATIONS } from './migrations/webhooks.js';

/**
 * Append-only: a released migration is never edited, only followed by a new one. Each feature's migrations live in a
 * file of migrations/; versions are unique across all of them and run in version order.
 */
export const MIGRATIONS: readonly Migration[] = [
  ...CORE_MIGRATIONS,
  ...DIRECTORY_MIGRATIONS,
  ...STEP_UP_MIGRATIONS,
  ...TRACING_MIGRATIONS,
  ...WEBHOOK_MIGRATIONS,
  ...ORDER_LISTING_MIGRATIONS,
].sort((a, b) => a.version - b.version);

for (const [i, m] of MIGRATIONS.entries()) {
  if (i > 0 && MIGRATIONS[i - 1]!.version === m.version) throw new Error(`two migrations have version ${m.version}`);
}

/** Applies pending migrations; an advisory lock keeps replicas starting together from racing. */
export async function migrate(db: Database): Promise<number[]> {
  return db.transaction(async (tx) => {
    await tx.query(`select pg_advisory_xact_lock(7251001)`);
    await tx.query(`create table if not exists schema_migrations (
      version integer primary key,
      name text not null,
      applied_at timestamptz not null default now()
    )`);
    const done = new Set(
      (await tx.query<{ version: number }>('select version from schema_migrations')).map((r) => r.version),
    );
    const applied: number[] = [];
    for (const m of MIGRATIONS) {
      if (done.has(m.version)) continue;
      for (const statement of m.statements) await tx.query(statement);
      await tx.query('insert into schema_migrations (version, name) values ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    return applied;
  });
}
