import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pg from 'pg';
import { pino, type Logger } from 'pino';
import request from 'supertest';
import type { Test } from 'supertest';
import { DEMO_TOTP_SECRETS } from '../../src/auth/idp/demoTotp.js';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { ACR } from '../../src/domain/policy.js';
import { loadConfig } from '../../src/config/index.js';
import type { AppDeps } from '../../src/app.js';
import { startServer, type RunningServer } from '../../src/server.js';
import type { Database } from '../../src/store/db.js';
import { openDatabase } from '../../src/store/open.js';
import { migrate } from '../../src/store/migrations.js';
import { headersOf, http } from './http.js';
import { currentTestRun, idpSecrets, testDatabase } from './testRun.js';

export interface GqlResponse {
  status: number;
  headers: Headers;
  body: {
    data?: Record<string, unknown> | null;
    errors?: { message: string; path?: unknown[]; extensions?: Record<string, unknown> }[];
  };
}

export interface TestServer {
  readonly url: string;
  /** The PostgreSQL schema of this server's database, when running against a server. */
  readonly schema?: string;
  readonly running: RunningServer;
  /** supertest against this server's URL, redirects not followed: `server.http.get('/healthz')`. */
  readonly http: ReturnType<typeof http>;
  /**
   * An access token from the embedded IdP, obtained through the real PKCE flow (cached per user and `mfa`). carol's is
   * an MFA token by default (password and her TOTP, as `npm run token -- --user carol --mfa` gets it), since staff
   * changes need one (step-up, RFC 9470); `{ mfa: false }` gives her password-only token. alice and bob have no
   * second factor: theirs are password-only.
   */
  token(user: 'alice' | 'bob' | 'carol', opts?: { mfa?: boolean }): Promise<string>;
  /** The three demo users' tokens at once. */
  users(): Promise<{ alice: string; bob: string; carol: string }>;
  gql(
    query: string,
    variables?: Record<string, unknown>,
    opts?: { token?: string; headers?: Record<string, string> },
  ): Promise<GqlResponse>;
  /** Current value of a Prometheus counter, from /metrics on the metrics port: `counter('x_total{code="Y"}')`. */
  counter(name: string): Promise<number>;
  /**
   * Sends one request (built on the supertest agent it is given) straight to this app and counts the SQL
   * statements run on that request's behalf alone: background work (the event bus's safety poll, sweeps, other
   * requests) runs outside the request's async context and is not counted.
   */
  sqlStatementsOf(
    build: (agent: ReturnType<typeof request>) => Test,
  ): Promise<{ res: request.Response; statements: number }>;
  /** Resolves once the next subscription on this server is listening for events (WebSocket or SSE). */
  nextSubscription(): Promise<void>;
  close(): Promise<void>;
}

/** The database a test server runs on, and how to give it back. */
interface TestDatabase {
  db: Database;
  schema?: string;
  release(): Promise<void>;
}

/**
 * The embedded database is a private in-memory copy of the run's template (initialised, migrated, seeded, IdP keys
 * and demo users in place), which opens in well under a second where a fresh PGlite takes several. On PostgreSQL, a schema
 * of its own, migrated, with the run's IdP keys so that the IdP does not generate new ones.
 */
async function openTestDatabase(): Promise<TestDatabase> {
  const run = currentTestRun();
  if (process.env.DATABASE_URL) {
    const schema = `test_${randomBytes(6).toString('hex')}`;
    const db = await openDatabase({ kind: 'postgres', url: process.env.DATABASE_URL, schema });
    await migrate(db);
    if (run) {
      await db.query('insert into idp_keys (id, jwks) values (1, $1::jsonb) on conflict (id) do nothing', [
        idpSecrets(run),
      ]);
    }
    return {
      db,
      schema,
      async release() {
        await db.close();
        const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
        await client.connect();
        await client.query(`drop schema if exists "${schema}" cascade`);
        await client.end();
      },
    };
  }
  const db = await testDatabase();
  return { db, release: () => db.close() };
}

/** What `loginWithPkce` needs to sign a demo user in with a second factor: the acr to ask for, the TOTP to answer. */
export function mfaLogin(user: string, mfa = true): { acrValues?: string; totpSecret?: string } {
  const secret = DEMO_TOTP_SECRETS[user];
  return mfa && secret ? { acrValues: ACR.mfa, totpSecret: secret } : {};
}

const statementScope = new AsyncLocalStorage<{ statements: number }>();

/**
 * The event outbox poll of a server that shares its database with no other: production's 5 s. Its own writes reach its
 * listeners without the poll (store/eventBus.ts: delivered at once, or brought back by Redis), and an idle server
 * polling every 200 ms costs 37 ms of CPU a second against 14 ms (docs/testing.md#how-long-it-takes).
 */
const ALONE_EVENT_POLL_MS = '5000';
/** Servers started with that poll: another may not join their database (it would wait up to 5 s to be heard). */
const pollingSlowly = new WeakSet<TestServer>();

/**
 * Starts the real server on port 0: embedded PGlite by default, or — when the environment names them, as CI's
 * second pass does — the PostgreSQL server in a schema of its own and the Redis server. `sameDatabaseAs` starts a
 * second app instance over the first one's database: its own pool on the same schema, or the same PGlite. The first
 * must have been started with `replicated: true` (or an EVENT_POLL_MS of its own): a server alone on its database polls
 * the event outbox every 5 s, replicas every 200 ms (the test default), since without Redis they hear each other only
 * through that poll.
 */
export async function startTestServer(
  env: Record<string, string> = {},
  opts: {
    sameDatabaseAs?: TestServer;
    /** Another server will share this one's database (`sameDatabaseAs`): keep the test default poll of 200 ms. */
    replicated?: boolean;
    /** Receives the server's log entries of level warn and above (instead of TEST_LOG_LEVEL's output). */
    onLog?: (entry: { level: number; msg: string } & Record<string, unknown>) => void;
    /** The server's logger, made by the test (say, src/logger.ts's with a destination it reads). */
    logger?: Logger;
    /** How webhook deliveries resolve names and open sockets (tests map names to addresses and count sockets). */
    webhookNetwork?: AppDeps['webhookNetwork'];
  } = {},
): Promise<TestServer> {
  const shared = opts.sameDatabaseAs;
  if (shared && pollingSlowly.has(shared)) {
    throw new Error('start the server whose database another shares with { replicated: true } (or an EVENT_POLL_MS)');
  }
  const alone = !shared && !opts.replicated && env.EVENT_POLL_MS === undefined;
  let owned: TestDatabase | undefined;
  let db: Database;
  let schema: string | undefined;
  if (shared && process.env.DATABASE_URL) {
    schema = shared.schema;
    db = await openDatabase({ kind: 'postgres', url: process.env.DATABASE_URL, schema: schema! });
  } else if (shared) {
    db = shared.running.app.db;
  } else {
    owned = await openTestDatabase();
    ({ db, schema } = owned);
  }
  const config = loadConfig(
    {
      NODE_ENV: 'test',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      DATA_DIR: 'memory',
      // Many servers share a process and production ones default to 9464: each takes a free metrics port.
      METRICS_PORT: '0',
      // No balancer watches a test server's /readyz: closing one in production mode (5 s by default) would only wait.
      DRAIN_DELAY_S: '0',
      ...(alone ? { EVENT_POLL_MS: ALONE_EVENT_POLL_MS } : {}),
      ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL, DATABASE_SCHEMA: schema! } : {}),
      ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}),
      ...env,
    },
    // The database is always handed in (a copy of the run's template, or the first replica's), so production's
    // demand for DATABASE_URL does not apply to a test instance.
    { databaseHandedIn: true },
  );
  let running: RunningServer;
  try {
    const { onLog } = opts;
    const logger = opts.logger
      ? opts.logger
      : onLog
        ? pino({ level: 'warn' }, { write: (line: string) => onLog(JSON.parse(line) as Parameters<typeof onLog>[0]) })
        : pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
    running = await startServer(config, logger, {
      db,
      ...(opts.webhookNetwork ? { webhookNetwork: opts.webhookNetwork } : {}),
    });
  } catch (error) {
    if (owned) await owned.release();
    else if (shared && process.env.DATABASE_URL) await db.close();
    throw error;
  }

  // Counts statements per request (see sqlStatementsOf), beside the process-wide metric.
  const countForMetrics = db.onStatement;
  running.app.db.onStatement = () => {
    countForMetrics?.();
    const scope = statementScope.getStore();
    if (scope) scope.statements++;
  };
  // A subscription is live once it listens to the event bus (or has joined a shared execution that does), which is
  // when it is counted open (http/realtime/subscribe.ts): a signal, not a sleep.
  const subscriptions = new EventEmitter();
  const open = running.app.metrics.openSubscriptions;
  const countOpen = open.inc.bind(open) as () => void;
  open.inc = (() => {
    countOpen();
    subscriptions.emit('listening');
  }) as typeof open.inc;

  const tokens = new Map<string, Promise<string>>();
  const agent = http(running.url);
  const server: TestServer = {
    url: running.url,
    ...(schema ? { schema } : {}),
    running,
    http: agent,
    token(user, { mfa = user === 'carol' } = {}) {
      const key = `${user}:${mfa}`;
      if (!tokens.has(key)) {
        tokens.set(
          key,
          loginWithPkce({ issuer: running.app.issuer, username: user, password: user, ...mfaLogin(user, mfa) }).then(
            (t) => t.accessToken,
          ),
        );
      }
      return tokens.get(key)!;
    },
    async users() {
      const [alice, bob, carol] = await Promise.all([
        server.token('alice'),
        server.token('bob'),
        server.token('carol'),
      ]);
      return { alice, bob, carol };
    },
    async gql(query, variables, opts = {}) {
      const res = await agent
        .post('/graphql')
        .set({
          'content-type': 'application/json',
          accept: 'application/graphql-response+json',
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
          ...opts.headers,
        })
        .send(JSON.stringify({ query, ...(variables ? { variables } : {}) }));
      return { status: res.status, headers: headersOf(res), body: res.body as GqlResponse['body'] };
    },
    async counter(name) {
      if (!running.metricsUrl) throw new Error('this server has METRICS_PORT=off');
      const res = await request(running.metricsUrl).get('/metrics');
      const line = res.text.split('\n').find((l) => l.startsWith(`${name} `));
      if (!line) throw new Error(`metric ${name} not found`);
      return Number(line.slice(name.length + 1));
    },
    async sqlStatementsOf(build) {
      const scope = { statements: 0 };
      const handler = (req: IncomingMessage, res: ServerResponse) =>
        statementScope.run(scope, () => running.app.app(req, res));
      const res = await build(request(handler));
      return { res, statements: scope.statements };
    },
    async nextSubscription() {
      await once(subscriptions, 'listening');
    },
    async close() {
      await running.close();
      if (owned) await owned.release();
      else if (shared && process.env.DATABASE_URL) await db.close();
    },
  };
  if (alone) pollingSlowly.add(server);
  return server;
}

/**
 * Two app instances over one database, B trusting A's identity provider: replicas behind a load balancer.
 * `env` applies to both (e.g. `REDIS_URL: ''` to leave the replicas only the database between them).
 */
export async function startReplicas(
  env: Record<string, string> = {},
  /** A's logger (B's is the default). */
  opts: { logger?: Logger } = {},
): Promise<{ a: TestServer; b: TestServer }> {
  const a = await startTestServer(env, { replicated: true, ...(opts.logger ? { logger: opts.logger } : {}) });
  const b = await startTestServer({ ...env, OIDC_ISSUER: a.running.app.issuer }, { sameDatabaseAs: a });
  return { a, b };
}

/** B first: it borrows A's database. */
export async function stopReplicas(replicas: { a: TestServer; b: TestServer }): Promise<void> {
  await replicas.b.close();
  await replicas.a.close();
}
