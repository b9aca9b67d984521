import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pino } from 'pino';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { loadConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';

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
  /** An access token from the embedded IdP, obtained through the real PKCE flow (cached per user). */
  token(user: 'alice' | 'bob' | 'carol'): Promise<string>;
  /** The three demo users' tokens at once. */
  users(): Promise<{ alice: string; bob: string; carol: string }>;
  gql(
    query: string,
    variables?: Record<string, unknown>,
    opts?: { token?: string; headers?: Record<string, string> },
  ): Promise<GqlResponse>;
  /** Current value of a Prometheus counter without labels, from /metrics. */
  counter(name: string): Promise<number>;
  close(): Promise<void>;
}

/**
 * Starts the real server on port 0: embedded PGlite in memory by default, or — when the
 * environment names them, as CI's second pass does — the PostgreSQL server in a schema of its
 * own and the Redis server. `sameDatabaseAs` starts a second app instance over the first one's
 * database: its own pool on the same schema, or the same in-process PGlite.
 */
export async function startTestServer(
  env: Record<string, string> = {},
  opts: { sameDatabaseAs?: TestServer } = {},
): Promise<TestServer> {
  const shared = opts.sameDatabaseAs;
  const ownsSchema = Boolean(process.env.DATABASE_URL) && !shared;
  const schema = shared
    ? shared.schema
    : process.env.DATABASE_URL
      ? `test_${randomBytes(6).toString('hex')}`
      : undefined;
  const config = loadConfig(
    {
      NODE_ENV: 'test',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      DATA_DIR: 'memory',
      ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL, DATABASE_SCHEMA: schema } : {}),
      ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}),
      ...env,
    },
    // A second instance over the first's embedded database: production's DATABASE_URL rule does not apply.
    { databaseHandedIn: Boolean(shared && !schema) },
  );
  const running = await startServer(
    config,
    pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    shared && !schema ? { db: shared.running.app.db } : {},
  );
  const tokens = new Map<string, Promise<string>>();

  const server: TestServer = {
    url: running.url,
    ...(schema ? { schema } : {}),
    running,
    token(user) {
      if (!tokens.has(user)) {
        tokens.set(
          user,
          loginWithPkce({ issuer: running.app.issuer, username: user, password: user }).then((t) => t.accessToken),
        );
      }
      return tokens.get(user)!;
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
      const res = await fetch(`${running.url}/graphql`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json',
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
          ...opts.headers,
        },
        body: JSON.stringify({ query, ...(variables ? { variables } : {}) }),
      });
      return { status: res.status, headers: res.headers, body: (await res.json()) as GqlResponse['body'] };
    },
    async counter(name) {
      const text = await (await fetch(`${running.url}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      if (!line) throw new Error(`metric ${name} not found`);
      return Number(line.split(' ')[1]);
    },
    async close() {
      await running.close();
      if (schema && ownsSchema) {
        const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
        await client.connect();
        await client.query(`drop schema if exists "${schema}" cascade`);
        await client.end();
      }
    },
  };
  return server;
}

/**
 * Two app instances over one database, B trusting A's identity provider: replicas behind a load balancer.
 * `env` applies to both (e.g. `REDIS_URL: ''` to leave the replicas only the database between them).
 */
export async function startReplicas(env: Record<string, string> = {}): Promise<{ a: TestServer; b: TestServer }> {
  const a = await startTestServer(env);
  const b = await startTestServer({ ...env, OIDC_ISSUER: a.running.app.issuer }, { sameDatabaseAs: a });
  return { a, b };
}

/** B first: it borrows A's database. */
export async function stopReplicas(replicas: { a: TestServer; b: TestServer }): Promise<void> {
  await replicas.b.close();
  await replicas.a.close();
}
