/**
 * What every server child but the app's harness (the floor, the GraphQL peers) uses to reach PostgreSQL the way the
 * app does: a `pg.Pool` configured like the app's (max 10, the bench's schema on the search_path), which counts its
 * statements and the /graphql requests served, and shows both at `GET /metrics` under the app's metric names, so that
 * the bench reads every server the same way.
 */
import pg from 'pg';

export function createCountingPool() {
  const pool = new pg.Pool({
    connectionString: process.env.DATABASE_URL,
    max: 10,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 5_000,
    options: `-c search_path="${process.env.DATABASE_SCHEMA!}"`,
  });
  pool.on('error', () => undefined);
  let statements = 0;
  let graphqlRequests = 0;
  return {
    async query<R>(sql: string, params: unknown[]): Promise<R[]> {
      statements++;
      return (await pool.query(sql, params)).rows as R[];
    },
    countRequest() {
      graphqlRequests++;
    },
    metricsText: () =>
      `# TYPE sql_statements_total counter\nsql_statements_total ${statements}\n` +
      `# TYPE http_requests_total counter\nhttp_requests_total{route="/graphql"} ${graphqlRequests}\n`,
    close: () => pool.end(),
  };
}
