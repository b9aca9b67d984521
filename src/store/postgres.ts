import { createHash } from 'node:crypto';
import { Socket } from 'node:net';
import pg from 'pg';
import type { Database, Queryable, ResultSet } from './db.js';
import { traced } from './statementSpans.js';
import { isoTimestamp, TIMESTAMPTZ } from './timestamps.js';
import { databaseCircuit } from './circuit.js';
import { isDatabaseUnavailable, translateDatabaseError } from './unavailable.js';

/** pg's parsers, except that timestamps stay text in the API's form (see isoTimestamp). */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === TIMESTAMPTZ && format !== 'binary'
      ? isoTimestamp
      : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

/** Connections per pool: at most this many statements of one replica run at once. */
export const POOL_SIZE = 10;

/** A TCP connection to the database that is not established by then is given up: the server is not there. */
const TCP_CONNECT_TIMEOUT_MS = 500;
/** At most this many distinct SQL texts become named prepared statements (see `run`). */
const MAX_NAMED = 500;
/** While the circuit is open, a probe tries to connect this often. */
const PROBE_EVERY_MS = 500;
const PROBE_QUERY_TIMEOUT_MS = 2_000;

/**
 * pg's socket, with a bound on the TCP handshake alone. A stopped server refuses at once, but a host that is gone
 * (or a network that drops packets) answers nothing, and connect() would wait for the pool's whole timeout. The
 * check runs after the event loop's poll phase (setImmediate), so a handshake the kernel has completed is never
 * given up just because the loop was busy when the timer came due.
 */
function boundedSocket(): Socket {
  const socket = new Socket();
  const timer = setTimeout(
    () =>
      setImmediate(() => {
        if (!socket.connecting) return;
        const error = Object.assign(new Error(`connect timed out after ${TCP_CONNECT_TIMEOUT_MS} ms`), {
          code: 'ETIMEDOUT',
        });
        socket.destroy(error);
      }),
    TCP_CONNECT_TIMEOUT_MS,
  );
  socket.once('connect', () => clearTimeout(timer));
  socket.once('close', () => clearTimeout(timer));
  return socket;
}

/**
 * pg-pool's messages for a connection that is slow rather than refused: the wait for a free client ran out (the pool
 * is busy), or a new connection's TCP handshake succeeded but the server did not finish its start-up in time (a busy
 * or loaded server). Neither opens the circuit: each fails only its own request, after the pool's 3 s.
 */
const SLOW_NOT_DOWN = /^(timeout exceeded when trying to connect|Connection terminated due to connection timeout)/;

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
    max: POOL_SIZE,
    idleTimeoutMillis: 30_000,
    // Bounds the wait for a free client: with the database saturated a request is refused with 503 + Retry-After
    // within 3 s instead of hanging. Shorter, and a busy moment on a loaded host turns into 503s that a balancer then
    // counts against a healthy replica. It also bounds a new connection's start-up once its TCP handshake is done
    // (boundedSocket bounds the handshake). A database that is down is not waited for at all: see the circuit.
    connectionTimeoutMillis: 3_000,
    stream: boundedSocket,
    types,
    ...(schema ? { options: `-c search_path="${schema}"` } : {}),
  });
  // An idle client that loses its connection emits here; without a listener the process would crash.
  pool.on('error', () => undefined);

  const circuit = databaseCircuit({
    retryMs: PROBE_EVERY_MS,
    probe: () =>
      withClient(
        async (client, discard) => {
          // A connection kept from before the outage may hang rather than fail: the probe does not wait for it.
          const probeQuery = { text: 'select 1', query_timeout: PROBE_QUERY_TIMEOUT_MS } as pg.QueryConfig;
          await client.query(probeQuery).catch((error: Error) => {
            discard(error);
            throw error;
          });
        },
        { viaCircuit: false },
      ),
    onChange: (open, cause) => db.onAvailability?.(!open, cause),
  });

  /**
   * A pooled client for `fn`, through the circuit: a failure to connect opens it, and while it is open calls fail at
   * once. `fn` calls `discard` when the connection must not be reused (pg-pool drops one whose connection broke).
   */
  async function withClient<T>(
    fn: (client: pg.PoolClient, discard: (why: Error) => void) => Promise<T>,
    { viaCircuit = true } = {},
  ): Promise<T> {
    if (viaCircuit) circuit.check();
    // The fast path: with the circuit closed and an idle client in the pool, connect() hands that client over
    // without touching the network, so there is nothing for the circuit to fail early and no waiter to register.
    const waits = viaCircuit && pool.idleCount === 0;
    const connecting = pool.connect();
    let client: pg.PoolClient;
    try {
      client = waits ? await circuit.wait(connecting, (late) => late.release()) : await connecting;
    } catch (error) {
      if (isDatabaseUnavailable(error) && !SLOW_NOT_DOWN.test((error as Error).message)) circuit.trip(error);
      return translateDatabaseError(error);
    }
    // A checked-out client reports a lost connection to the query in progress and also emits it: unheard, that
    // would crash the process.
    const onError = () => undefined;
    client.on('error', onError);
    let discarded: Error | undefined;
    try {
      return await fn(client, (why) => (discarded = why));
    } finally {
      client.off('error', onError);
      client.release(discarded);
    }
  }

  /**
   * Named prepared statements: PostgreSQL parses and plans a named statement once per connection and then only binds
   * and executes it, where an unnamed one is parsed and planned on every call. The program's SQL is a fixed set of
   * texts with parameters, each named once; past MAX_NAMED texts (SQL built at run time, were there any) statements stay unnamed, so
   * no connection keeps an unbounded number of them.
   */
  const names = new Map<string, string>();
  /**
   * The config of a statement whose rows come as arrays (queryResult, db.ts), once per text: each query is given an
   * empty object that inherits it. pg copies a config's own properties, descriptor by descriptor, for every query
   * (cloneQueryConfig: 2.5–4 µs a statement), and an object with none it copies for 0.3–0.8 µs.
   */
  const arrayConfigs = new Map<string, { readonly text: string; readonly rowMode: 'array' }>();
  const arrayConfig = (text: string): pg.QueryConfig => {
    let config = arrayConfigs.get(text);
    if (config === undefined) {
      config = Object.freeze({ text, rowMode: 'array' as const });
      if (arrayConfigs.size < MAX_NAMED) arrayConfigs.set(text, config);
    }
    return Object.create(config) as pg.QueryConfig;
  };
  /**
   * Runs one statement on `client`. The query is built from the text, not from a config object, which pg would copy
   * property descriptor by property descriptor for every statement (1.6 µs against 0.1 µs a statement); a statement
   * whose rows come as arrays needs a config, and inherits it (arrayConfig).
   */
  const run = <R>(client: pg.PoolClient, text: string, params?: readonly unknown[], arrays = false) =>
    new Promise<R>((resolve, reject) => {
      const done = (error: Error | undefined, result: unknown) => (error ? reject(error) : resolve(result as R));
      const source = arrays ? arrayConfig(text) : text;
      // Without parameters pg sends the text by the simple protocol, which also runs several commands (migrations).
      if (!params?.length) return void client.query(new pg.Query(source, done));
      const query = new pg.Query(source, params as unknown[], done);
      let name = names.get(text);
      if (name === undefined && names.size < MAX_NAMED) names.set(text, (name = `s${names.size}`));
      if (name) (query as { name?: string }).name = name;
      client.query(query);
    }).catch(translateDatabaseError);

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
  /**
   * One statement of the program's, counted (onStatement) and in its span, on the transaction's client or else on a
   * pooled one: query and queryResult alike.
   */
  const send = <R>(sql: string, params: readonly unknown[] | undefined, arrays: boolean, client?: pg.PoolClient) => {
    db.onStatement?.();
    const on = (c: pg.PoolClient) => traced(sql, engine, () => run<R>(c, sql, params, arrays));
    return client ? on(client) : withClient(on);
  };
  const db: Database = {
    kind: 'postgres',
    identity: createHash('sha256')
      .update(`${server.host}${server.pathname}#${schema ?? 'public'}`)
      .digest('hex')
      .slice(0, 16),
    async query<R>(sql: string, params?: readonly unknown[]) {
      return (await send<{ rows: R[] }>(sql, params, false)).rows;
    },
    async queryResult(sql: string, params?: readonly unknown[]): Promise<ResultSet> {
      return send<ResultSet>(sql, params, true);
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>) {
      return withClient(async (client, discard) => {
        const tx: Queryable = {
          async query<R>(sql: string, params?: readonly unknown[]) {
            return (await send<{ rows: R[] }>(sql, params, false, client)).rows;
          },
          queryResult: (sql: string, params?: readonly unknown[]) => send<ResultSet>(sql, params, true, client),
        };
        await run(client, 'begin');
        try {
          const value = await fn(tx);
          await run(client, 'commit');
          return value;
        } catch (error) {
          // A connection whose rollback failed may still be inside the transaction: nobody else gets it.
          await client.query('rollback').catch(discard);
          throw error;
        }
      });
    },
    async ping() {
      await withClient((client) => client.query('select 1').catch(translateDatabaseError));
    },
    async close() {
      circuit.stop();
      await pool.end();
    },
  };
  return db;
}
