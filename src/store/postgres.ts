import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Database, Queryable } from './db.js';
import { traced } from './statementSpans.js';
import { isoTimestamp, TIMESTAMPTZ } from './timestamps.js';
import { translateDatabaseError } from './unavailable.js';

/** pg's parsers, except that timestamps stay text in the API's form (see isoTimestamp). */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === TIMESTAMPTZ && format !== 'binary'
      ? isoTimestamp
      : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

export async function openPostgres(url: string, schema?: string): Promise<Database> {
  if (schema) {
    // The schema must exist before pooled connections put it on their search_path.
    const setup = new pg.Client({ connectionString: url });
    await setup.connect();
    try {
      await setup.query(`create schema if not exists "${schema}"`);
    } finally {
      await setup.end();
    }
  }
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    idleTimeoutMillis: 30_000,
    // Bounds both a new connection and the wait for a free one: with the database saturated or unreachable a
    // request is refused with 503 + Retry-After within 3 s instead of hanging (a stopped server refuses the
    // connection at once, so that case is answered at once). Shorter, and a busy moment on a loaded host
    // turns into 503s that a balancer then counts against a healthy replica.
    connectionTimeoutMillis: 3_000,
    types,
    ...(schema ? { options: `-c search_path="${schema}"` } : {}),
  });
  // An idle client that loses its connection emits here; without a listener the process would crash.
  pool.on('error', () => undefined);

  const server = new URL(url);
  // Statement spans' attributes (OpenTelemetry's PostgreSQL conventions: the namespace is database|schema).
  const database = decodeURIComponent(server.pathname.slice(1)) || 'postgres';
  const engine = {
    'db.system.name': 'postgresql',
    'db.namespace': schema ? `${database}|${schema}` : database,
    'server.address': server.hostname,
    'server.port': Number(server.port || 5432),
    'orders.db.engine': 'postgres',
  } as const;
  const db: Database = {
    kind: 'postgres',
    identity: createHash('sha256')
      .update(`${server.host}${server.pathname}#${schema ?? 'public'}`)
      .digest('hex')
      .slice(0, 16),
    async query<R>(sql: string, params?: readonly unknown[]) {
      db.onStatement?.();
      const result = await traced(sql, engine, () =>
        pool.query(sql, params as unknown[] | undefined).catch(translateDatabaseError),
      );
      return result.rows as R[];
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>) {
      const client = await pool.connect().catch(translateDatabaseError);
      const run = (sql: string, params?: readonly unknown[]) =>
        client.query(sql, params as unknown[] | undefined).catch(translateDatabaseError);
      const tx: Queryable = {
        async query<R>(sql: string, params?: readonly unknown[]) {
          db.onStatement?.();
          return (await traced(sql, engine, () => run(sql, params))).rows as R[];
        },
      };
      let broken = false;
      try {
        await run('begin');
        const value = await fn(tx);
        await run('commit');
        return value;
      } catch (error) {
        try {
          await client.query('rollback');
        } catch {
          broken = true;
        }
        throw error;
      } finally {
        client.release(broken);
      }
    },
    async ping() {
      await pool.query('select 1').catch(translateDatabaseError);
    },
    async close() {
      await pool.end();
    },
  };
  return db;
}
