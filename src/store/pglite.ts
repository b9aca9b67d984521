import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import type { Database, Queryable, ResultSet } from './db.js';
import { traced } from './statementSpans.js';
import { isoTimestamp, TIMESTAMPTZ } from './timestamps.js';

/** Statement spans' attributes for the embedded engine: PostgreSQL, in this process (no server address). */
const ENGINE = { 'db.system.name': 'postgresql', 'orders.db.engine': 'pglite' } as const;
/** queryResult's rows are arrays in the order of their fields (db.ts). */
const ARRAYS = { rowMode: 'array' } as const;

/**
 * Embedded PostgreSQL: one connection, which PGlite itself serializes around transactions. `loadDataDir` starts it
 * from a tarball of a data directory (PGlite's dumpDataDir) instead of an empty one: tests open an in-memory copy of
 * a migrated, seeded template that way.
 */
export async function openPglite(dataDir: string | 'memory', opts: { loadDataDir?: Blob } = {}): Promise<Database> {
  if (dataDir !== 'memory') mkdirSync(dataDir, { recursive: true });
  // Timestamps stay text in the API's form (see isoTimestamp), as on PostgreSQL.
  const pglite = new PGlite({
    ...(dataDir === 'memory' ? {} : { dataDir }),
    ...opts,
    parsers: { [TIMESTAMPTZ]: isoTimestamp },
  });
  await pglite.waitReady;

  /** One statement of the program's, counted (onStatement) and in its span: query and queryResult alike. */
  const send = <R>(on: Pick<PGlite, 'query'>, sql: string, params?: readonly unknown[], options?: typeof ARRAYS) => {
    db.onStatement?.();
    return traced(sql, ENGINE, () => on.query<R>(sql, params as unknown[] | undefined, options));
  };
  const db: Database = {
    kind: 'pglite',
    // An embedded database belongs to this process alone.
    identity: randomUUID(),
    async query<R>(sql: string, params?: readonly unknown[]) {
      return (await send<R>(pglite, sql, params)).rows;
    },
    queryResult: (sql: string, params?: readonly unknown[]): Promise<ResultSet> =>
      send<unknown[]>(pglite, sql, params, ARRAYS),
    transaction<T>(fn: (tx: Queryable) => Promise<T>) {
      return pglite.transaction(async (inner) => {
        const tx: Queryable = {
          async query<R>(sql: string, params?: readonly unknown[]) {
            return (await send<R>(inner, sql, params)).rows;
          },
          queryResult: (sql: string, params?: readonly unknown[]) => send<unknown[]>(inner, sql, params, ARRAYS),
        };
        return fn(tx);
      });
    },
    async ping() {
      await pglite.query('select 1');
    },
    async close() {
      await pglite.close();
    },
  };
  return db;
}
