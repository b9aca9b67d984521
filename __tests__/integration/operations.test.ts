// Operations: metrics and health, tracing, the expiry sweep, the shared rate budget, in one Jest file: a file loads its
// modules into a fresh context and costs about 1.5 s of CPU before its first test (docs/testing.md#how-long-it-takes).
// Each top-level describe block below was a test file of its own, named after it (the comment above it gives the old
// file name), with its tests unchanged, starting the servers it starts; none shares a server with another block.
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient } from 'graphql-ws';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { pino } from 'pino';
import request from 'supertest';
import WebSocket from 'ws';
import { createSigninThrottle, SIGNIN_LIMITS } from '../../src/auth/idp/signinThrottle.js';
import { createRateBudget } from '../../src/http/middleware/rateBudget.js';
import { createLogger } from '../../src/logger.js';
import { openRedis } from '../../src/store/redis.js';
import { type RedisServer, startRedis } from '../helpers/infra.js';
import { eventually } from '../helpers/load.js';
import { rest } from '../helpers/openapi.js';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlpReceiver.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sseSubscriber } from '../helpers/sseSubscriber.js';
import { subscriber } from '../helpers/subscriber.js';
import { send, TRANSPORTS } from '../helpers/transports.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhookReceiver.js';

// ─── was __tests__/integration/operations.test.ts ───
describe('operations', () => {
  /** The whole exposition text from the metrics port. */
  async function scrape(server: TestServer): Promise<string> {
    const res = await request(server.running.metricsUrl!).get('/metrics');
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'] ?? '', /^text\/plain; version=0\.0\.4/);
    assert.equal(res.headers['cache-control'], 'no-store');
    return res.text;
  }

  describe('operational endpoints', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer({}, { replicated: true });
    });
    afterAll(() => server.close());

    test('/metrics counts GraphQL errors by code, apart from HTTP statuses', async () => {
      await server.gql('{ recentOrders { id } }'); // anonymous: UNAUTHENTICATED inside a 200
      const text = await scrape(server);
      assert.match(text, /^graphql_errors_total\{code="UNAUTHENTICATED"\} [1-9]/m);
      assert.match(text, /^http_requests_total\{route="\/graphql",method="POST",status="200"\} [1-9]/m);
      assert.match(text, /^sql_statements_total [1-9]/m);
    });

    test('/metrics is served on METRICS_PORT only: the public port answers 404, the metrics port nothing else', async () => {
      const metricsPort = Number(new URL(server.running.metricsUrl!).port);
      assert.ok(metricsPort > 0 && metricsPort !== Number(new URL(server.url).port));
      const pub = await server.http.get('/metrics');
      assert.equal(pub.status, 404);
      assert.equal(pub.get('content-type'), 'application/problem+json; charset=utf-8');
      assert.equal(pub.body.type, '/problems/route-not-found');
      const other = await request(server.running.metricsUrl!).get('/graphql');
      assert.equal(other.status, 404);
      assert.equal(other.text, 'Only GET /metrics is served here.\n');
      const post = await request(server.running.metricsUrl!).post('/metrics');
      assert.equal(post.status, 404);
    });

    test('GraphQL operations are counted by type on all four transports', async () => {
      const token = await server.token('alice');
      const count = async (type: string) => server.counter(`graphql_operations_total{type="${type}"}`).catch(() => 0);
      const before = await count('query');
      for (const transport of TRANSPORTS) {
        const out = await send(server.url, transport, { query: '{ products { sku } }' }, token);
        assert.ok(out.body.data, `${transport}: ${JSON.stringify(out.body)}`);
      }
      assert.equal(await count('query'), before + TRANSPORTS.length);
    });

    test('open subscriptions are a gauge: up while a WebSocket or SSE subscription is open, down when it ends', async () => {
      const token = await server.token('bob');
      const open = () => server.counter('graphql_subscriptions_open');
      const before = await open();
      const ws = subscriber(server.url, token);
      let listening = server.nextSubscription();
      const wsStream = ws.subscribe('subscription { orderCreated { id } }');
      await listening;
      assert.equal(await open(), before + 1);
      listening = server.nextSubscription();
      const sse = sseSubscriber(server.url, token, 'subscription { orderCreated { id } }');
      await listening;
      assert.equal(await open(), before + 2);
      wsStream.dispose();
      sse.close();
      await ws.dispose();
      // The server learns of each end asynchronously: wait for the gauge itself, not for time.
      while ((await open()) !== before) await new Promise((resolve) => setImmediate(resolve));
      assert.equal(await open(), before);
    });

    test('the root names the entry points', async () => {
      const res = await server.http.get('/');
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, {
        service: 'orders-api',
        graphql: '/graphql',
        rest: '/v1/orders',
        openapi: '/v1/openapi.json',
        signIn: '/auth/login',
        session: '/auth/session',
      });
    });

    test('an unknown path is a 404 problem+json, whose instance leaves the query out', async () => {
      const res = await server.http.get('/nope?x=1');
      assert.equal(res.status, 404);
      assert.equal(res.get('content-type'), 'application/problem+json; charset=utf-8');
      assert.deepEqual(res.body, {
        type: '/problems/route-not-found',
        title: 'No such resource',
        status: 404,
        detail: 'Nothing is served at /nope.',
        instance: '/nope',
        code: 'ROUTE_NOT_FOUND',
      });
    });

    test('/readyz turns 503 once draining starts, while /healthz stays 200', async () => {
      // A second instance over the same database: draining it leaves the file's server alone.
      const own = await startTestServer({}, { sameDatabaseAs: server });
      try {
        assert.equal((await own.http.get('/readyz')).status, 200);
        own.running.app.startDraining();
        const ready = await own.http.get('/readyz');
        assert.equal(ready.status, 503);
        assert.deepEqual(ready.body, { status: 'draining' });
        assert.equal((await own.http.get('/healthz')).status, 200);
      } finally {
        await own.close();
      }
    });

    test('a restart keeps the identity provider keys, so issued tokens stay valid', async () => {
      const token = await server.token('alice');
      const jwks = (await server.http.get('/idp/jwks')).body as unknown;
      assert.ok((jwks as { keys: unknown[] }).keys.length >= 1);
      // The keys live in the database: the IdP re-reads them instead of generating new ones.
      const [row] = await server.running.app.db.query<{ n: number }>('select count(*)::int as n from idp_keys');
      assert.equal(row!.n, 1);
      const res = await server.gql('{ viewer { subject } }', undefined, { token });
      assert.deepEqual(res.body.data, { viewer: { subject: 'alice' } });
    });
  });

  describe('refusals on the metrics port', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer({ RATE_LIMIT_POINTS: '3', RATE_LIMIT_WINDOW_S: '600', MAX_QUERY_DEPTH: '3' });
    });
    afterAll(() => server.close());
    const refusals = (reason: string) => server.counter(`refusals_total{reason="${reason}"}`).catch(() => 0);

    test('a document over the static limits is refused and counted as query_limits', async () => {
      const before = await refusals('query_limits');
      const res = await server.gql('{ recentOrders { items { product { name } } } }');
      assert.equal(res.body.errors?.[0]?.extensions?.code, 'GRAPHQL_VALIDATION_FAILED');
      assert.equal(await refusals('query_limits'), before + 1);
    });

    test('a spent rate budget is refused with 429 on REST and GraphQL and counted as rate_budget', async () => {
      const token = await server.token('carol');
      const before = await refusals('rate_budget');
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await server.http.get('/v1/orders').set('authorization', `Bearer ${token}`);
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
      const gql = await server.gql('{ products { sku } }', undefined, { token });
      assert.equal(gql.status, 429);
      assert.equal(gql.body.errors?.[0]?.extensions?.code, 'RATE_LIMITED');
      assert.equal(await refusals('rate_budget'), before + 3);
    });
  });

  describe('METRICS_PORT=off', () => {
    test('serves no metrics at all, and the public port still does not', async () => {
      const server = await startTestServer({ METRICS_PORT: 'off' });
      try {
        assert.equal(server.running.metricsUrl, undefined);
        assert.equal((await server.http.get('/metrics')).status, 404);
      } finally {
        await server.close();
      }
    });
  });
});

// ─── was __tests__/integration/tracing.test.ts ───
describe('tracing', () => {
  const SERVER = 2;
  const CLIENT = 3;
  const CONSUMER = 5;

  /** A fresh W3C trace context, as a caller's tracer would send it. */
  function traceContext() {
    const traceId = randomBytes(16).toString('hex');
    const spanId = randomBytes(8).toString('hex');
    return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
  }

  const childrenOf = (spans: readonly ReceivedSpan[], parent: ReceivedSpan) =>
    spans.filter((s) => s.traceId === parent.traceId && s.parentSpanId === parent.spanId);

  const only = (spans: readonly ReceivedSpan[], name: string) => {
    const found = spans.filter((s) => s.name === name);
    assert.equal(found.length, 1, `one ${name} span expected, found ${found.map((s) => s.name).join(', ') || 'none'}`);
    return found[0]!;
  };

  /** Two replicas over one database with tracing on, fanning events out through Redis only (the poll is an hour). */
  describe('tracing (OpenTelemetry, OTLP to a real receiver)', () => {
    let receiver: OtlpReceiver;
    let redis: RedisServer | undefined;
    let a: TestServer;
    let b: TestServer;
    let carol: string;
    let alice: string;
    const logLines: Record<string, unknown>[] = [];
    let hooks: WebhookReceiver | undefined;

    beforeAll(async () => {
      receiver = await startOtlpReceiver();
      if (!process.env.REDIS_URL) redis = await startRedis();
      const env = {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '20',
        REDIS_URL: process.env.REDIS_URL ?? redis!.url,
        // Events reach the other replica through Redis alone during this test.
        EVENT_POLL_MS: '3600000',
        // The webhook receiver is on loopback.
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      };
      const logger = createLogger('debug', {
        traced: true,
        destination: { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) },
      });
      a = await startTestServer(env, { logger, replicated: true });
      b = await startTestServer({ ...env, OIDC_ISSUER: a.running.app.issuer }, { sameDatabaseAs: a });
      ({ carol, alice } = await a.users());
    });
    afterAll(async () => {
      await hooks?.close();
      await b?.close();
      await a?.close();
      await redis?.stop();
      await receiver?.close();
    });

    test('a GraphQL query with a traceparent: HTTP server → GraphQL operation → execute → two statements, and its log line', async () => {
      const { traceId, spanId, traceparent } = traceContext();
      const query = `query RecentOrders${traceId.slice(0, 6)} { recentOrders(first: 100) { id status customer { name } } }`;
      const res = await a.gql(query, undefined, { token: carol, headers: { traceparent } });
      assert.equal(res.status, 200);
      assert.equal((res.body.data!.recentOrders as unknown[]).length, 100);

      const spans = (
        await receiver.waitFor((all) => all.some((s) => s.traceId === traceId && s.kind === SERVER))
      ).filter((s) => s.traceId === traceId);
      const server = spans.find((s) => s.kind === SERVER)!;
      assert.equal(server.parentSpanId, spanId, 'the server span continues the caller’s span');
      assert.equal(server.name, 'POST /graphql');
      assert.equal(server.attributes['http.request.method'], 'POST');
      assert.equal(server.attributes['http.route'], '/graphql');
      assert.equal(server.attributes['url.path'], '/graphql');
      assert.equal(server.attributes['http.response.status_code'], 200);
      assert.equal(server.resource['service.name'], 'orders-api');

      const operation = only(childrenOf(spans, server), `query RecentOrders${traceId.slice(0, 6)}`);
      assert.equal(operation.attributes['graphql.operation.type'], 'query');
      assert.equal(operation.attributes['graphql.operation.name'], `RecentOrders${traceId.slice(0, 6)}`);
      assert.equal(
        operation.attributes['orders.graphql.document.sha256'],
        createHash('sha256').update(query).digest('hex'),
      );
      assert.equal(operation.attributes['graphql.document'], undefined);
      const steps = childrenOf(spans, operation);
      // A document Apollo has not seen yet is parsed and validated: both are spans of their own.
      only(steps, 'graphql.parse');
      only(steps, 'graphql.validate');
      const execute = only(steps, 'graphql.execute');

      const statements = childrenOf(spans, execute).filter((s) => s.attributes['db.system.name'] === 'postgresql');
      assert.deepEqual(statements.map((s) => s.name).sort(), ['SELECT customers', 'SELECT orders']);
      for (const statement of statements) {
        assert.equal(statement.kind, CLIENT);
        assert.equal(statement.attributes['db.operation.name'], 'SELECT');
        assert.match(String(statement.attributes['db.query.text']), /^select .* from (orders|customers)\b/);
      }
      // The rate budget's charge is a Redis command of the operation.
      const redisCommand = spans.find((s) => s.attributes['db.system.name'] === 'redis');
      assert.ok(redisCommand, 'a Redis span');
      assert.equal(redisCommand.kind, CLIENT);

      // The response's log line (written when the response closes) carries the same trace.
      const line = logLines.find((l) => l.msg === 'request completed' && l.trace_id === traceId);
      assert.ok(line, 'the request log line carries trace_id');
      assert.equal(line.span_id, server.spanId);

      // Sent again, the document is Apollo's already: no parse or validate span this time.
      const again = traceContext();
      assert.equal(
        (await a.gql(query, undefined, { token: carol, headers: { traceparent: again.traceparent } })).status,
        200,
      );
      const second = (
        await receiver.waitFor((all) => all.some((s) => s.traceId === again.traceId && s.kind === SERVER))
      ).filter((s) => s.traceId === again.traceId);
      assert.deepEqual(
        second.filter((s) => s.name.startsWith('graphql.')).map((s) => s.name),
        ['graphql.execute'],
      );
    });

    test('a mutation on replica A reaches WebSocket and SSE subscribers on B: delivery spans linked to A’s trace', async () => {
      const placed = await rest(a.url, 'POST', '/orders', {
        token: alice,
        body: { items: [{ sku: 'WC-005', qty: 1 }] },
        headers: { 'idempotency-key': randomUUID() },
      });
      assert.equal(placed.status, 201);
      const orderId = placed.json<{ id: string }>().id;

      // The WebSocket names its trace in connection_init; the SSE request in its headers.
      const wsTrace = traceContext();
      const ws = createWsClient({
        url: `${b.url.replace(/^http/, 'ws')}/graphql`,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        connectionParams: { authorization: `Bearer ${alice}`, traceparent: wsTrace.traceparent },
      });
      const sseTrace = traceContext();
      const sse = createSseClient({
        url: `${b.url}/graphql/stream`,
        retryAttempts: 0,
        headers: { authorization: `Bearer ${alice}`, traceparent: sseTrace.traceparent },
      });
      const got = { ws: [] as unknown[], sse: [] as unknown[] };
      const arrived = (which: 'ws' | 'sse') =>
        new Promise<void>((resolve, reject) => {
          const sink = (value: unknown) => {
            got[which].push(value);
            resolve();
          };
          const query = `subscription ${which === 'ws' ? 'WsWatch' : 'SseWatch'}($id: ID) { orderUpdated(id: $id) { id status customer { name } } }`;
          const client = which === 'ws' ? ws : sse;
          client.subscribe(
            { query, variables: { id: orderId } },
            {
              next: sink,
              error: (error) => reject(new Error(`${which}: ${JSON.stringify(error)}`)),
              complete: () => undefined,
            },
          );
        });
      let listening = b.nextSubscription();
      const wsArrived = arrived('ws');
      await Promise.race([listening, wsArrived]);
      listening = b.nextSubscription();
      const sseArrived = arrived('sse');
      await Promise.race([listening, sseArrived]);

      const write = traceContext();
      const changed = await a.gql(
        'mutation Cancel($id: ID!) { cancelOrder(id: $id) { id status } }',
        { id: orderId },
        { token: alice, headers: { traceparent: write.traceparent } },
      );
      assert.equal(changed.status, 200);
      assert.equal((changed.body.data!.cancelOrder as { status: string }).status, 'cancelled');
      await Promise.all([wsArrived, sseArrived]);
      ws.dispose();
      sse.dispose();

      const spans = await receiver.waitFor(
        (all) =>
          all.filter((s) => s.kind === CONSUMER && s.links.some((l) => l.traceId === write.traceId)).length >= 2 &&
          all.some((s) => s.traceId === write.traceId && s.kind === SERVER) &&
          // The stream's request span ends with the stream (closed above).
          all.some((s) => s.traceId === sseTrace.traceId && s.kind === SERVER),
      );
      const written = spans.filter((s) => s.traceId === write.traceId);
      const deliveries = spans.filter((s) => s.kind === CONSUMER && s.links.some((l) => l.traceId === write.traceId));
      assert.deepEqual(deliveries.map((d) => d.name).sort(), ['deliver SseWatch', 'deliver WsWatch']);
      for (const delivery of deliveries) {
        assert.notEqual(delivery.traceId, write.traceId, 'a delivery is a trace of its own, linked to the writer');
        assert.equal(delivery.parentSpanId, '');
        const link = delivery.links.find((l) => l.traceId === write.traceId)!;
        assert.ok(
          written.some((s) => s.spanId === link.spanId),
          'the link points at a span of the writing request on replica A',
        );
        assert.equal(delivery.attributes['messaging.operation.type'], 'process');
        assert.equal(delivery.attributes['graphql.operation.type'], 'subscription');
        assert.equal(delivery.attributes['orders.subscribers'], 1);
        // The execution for the group runs inside the delivery: its customer lookup is a statement under it.
        assert.ok(childrenOf(spans, delivery).some((s) => s.name === 'SELECT customers'));
      }

      // Each subscription's operation continued the trace its transport named.
      const wsOperation = spans.find((s) => s.traceId === wsTrace.traceId && s.name === 'subscription WsWatch');
      assert.ok(wsOperation, 'the WebSocket operation span');
      assert.equal(wsOperation.parentSpanId, wsTrace.spanId);
      assert.equal(wsOperation.kind, SERVER);
      const sseRequest = spans.find((s) => s.traceId === sseTrace.traceId && s.kind === SERVER);
      assert.ok(sseRequest, 'the SSE request span');
      assert.equal(sseRequest.parentSpanId, sseTrace.spanId);
      assert.equal(sseRequest.attributes['http.route'], '/graphql/stream');
      assert.ok(childrenOf(spans, sseRequest).some((s) => s.name === 'subscription SseWatch'));
    });

    test('a webhook delivery attempt is an HTTP client span linked to the order change, and sends its traceparent', async () => {
      hooks = await startWebhookReceiver();
      const endpoint = await rest(a.url, 'POST', '/webhook-endpoints', {
        token: alice,
        body: { url: hooks.url, events: ['order.created'] },
      });
      assert.equal(endpoint.status, 201, endpoint.text);
      const write = traceContext();
      const placed = await rest(a.url, 'POST', '/orders', {
        token: alice,
        body: { items: [{ sku: 'KB-001', qty: 1 }] },
        headers: { 'idempotency-key': randomUUID(), traceparent: write.traceparent },
      });
      assert.equal(placed.status, 201);
      const orderId = placed.json<{ id: string }>().id;
      const [message] = (await hooks.waitFor((all) => all.some((m) => m.payload.data.order?.id === orderId))).filter(
        (m) => m.payload.data.order?.id === orderId,
      );
      hooks.verify(message!, endpoint.json<{ secret: string }>().secret);
      const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(message!.headers.traceparent));
      assert.ok(sent, `a traceparent header: ${String(message!.headers.traceparent)}`);

      const spans = await receiver.waitFor(
        (all) =>
          all.some((s) => s.kind === CLIENT && s.links.some((l) => l.traceId === write.traceId)) &&
          all.some((s) => s.traceId === write.traceId && s.kind === SERVER),
      );
      const attempt = spans.find((s) => s.kind === CLIENT && s.links.some((l) => l.traceId === write.traceId))!;
      assert.equal(attempt.name, 'POST');
      assert.notEqual(attempt.traceId, write.traceId, 'a delivery is a trace of its own, linked to the writer');
      assert.equal(attempt.parentSpanId, '');
      assert.deepEqual([attempt.traceId, attempt.spanId], [sent[1], sent[2]], 'the receiver is told the attempt span');
      const link = attempt.links.find((l) => l.traceId === write.traceId)!;
      assert.ok(
        spans.some((s) => s.traceId === write.traceId && s.spanId === link.spanId),
        'the link points at a span of the request that placed the order',
      );
      assert.equal(attempt.attributes['http.request.method'], 'POST');
      assert.equal(attempt.attributes['http.response.status_code'], 200);
      assert.equal(attempt.attributes['server.address'], '127.0.0.1');
      assert.equal(attempt.attributes['webhook.message.id'], message!.id);
      assert.equal(attempt.attributes['webhook.event.type'], 'order.created');
    });

    test('error answers carry the trace id: REST problems as traceId, GraphQL errors as extensions.traceId', async () => {
      const missing = traceContext();
      const problem = await rest(a.url, 'GET', '/orders/ord_0000000000000000000000000', {
        token: alice,
        headers: { traceparent: missing.traceparent },
      });
      assert.equal(problem.status, 404);
      assert.equal(problem.json<{ traceId: string }>().traceId, missing.traceId);

      const invalid = traceContext();
      const res = await a.gql('{ recentOrders { nope } }', undefined, {
        token: alice,
        headers: { traceparent: invalid.traceparent },
      });
      // application/graphql-response+json: a request error is 400.
      assert.equal(res.status, 400);
      assert.equal(res.body.errors?.[0]?.extensions?.code, 'GRAPHQL_VALIDATION_FAILED');
      assert.equal(res.body.errors?.[0]?.extensions?.traceId, invalid.traceId);

      // A refusal before GraphQL runs (no credential where one is required) carries it too.
      const refused = traceContext();
      const unauthenticated = await a.http
        .post('/graphql')
        .set({ 'content-type': 'application/json', authorization: 'Bearer nope', traceparent: refused.traceparent })
        .send('{"query":"{ viewer { subject } }"}');
      assert.equal(unauthenticated.status, 401);
      assert.equal(
        (unauthenticated.body as { errors: { extensions: { traceId: string } }[] }).errors[0]!.extensions.traceId,
        refused.traceId,
      );
    });

    test('a trace its caller did not sample: nothing exported, yet its id reaches the error answer and the log line', async () => {
      // parentbased_always_on (the default) follows the caller's decision: flags 00 means not sampled.
      const unsampled = traceContext();
      const traceparent = unsampled.traceparent.replace(/-01$/, '-00');
      const ok = await a.gql(
        `query Unsampled${unsampled.traceId.slice(0, 6)} { recentOrders(first: 5) { id } }`,
        undefined,
        {
          token: carol,
          headers: { traceparent },
        },
      );
      assert.equal(ok.status, 200);
      assert.equal((ok.body.data!.recentOrders as unknown[]).length, 5);
      const invalid = await a.gql('{ recentOrders { nope } }', undefined, { token: carol, headers: { traceparent } });
      assert.equal(invalid.status, 400);
      assert.equal(invalid.body.errors?.[0]?.extensions?.traceId, unsampled.traceId);
      const lines = logLines.filter((l) => l.msg === 'request completed' && l.trace_id === unsampled.traceId);
      assert.equal(lines.length, 2, 'both requests’ log lines carry the unsampled trace');

      // A sampled request after them: once its spans are in, the unsampled ones would have been too.
      const sampled = traceContext();
      const after = await a.gql('{ recentOrders(first: 1) { id } }', undefined, {
        token: carol,
        headers: { traceparent: sampled.traceparent },
      });
      assert.equal(after.status, 200);
      const all = await receiver.waitFor((spans) =>
        spans.some((s) => s.traceId === sampled.traceId && s.kind === SERVER),
      );
      assert.deepEqual(
        all.filter((s) => s.traceId === unsampled.traceId).map((s) => s.name),
        [],
      );
      assert.ok(all.some((s) => s.traceId === sampled.traceId && s.name === 'SELECT orders'));
    });

    test('no span attribute holds a token, a cookie, a password, a variable value or an SQL literal', async () => {
      const secretVariable = `ord_${randomBytes(12).toString('hex')}`;
      const marker = traceContext();
      await a.gql(
        'query Lookup($id: ID!) { order(id: $id) { id } }',
        { id: secretVariable },
        {
          token: carol,
          headers: { traceparent: marker.traceparent, cookie: 'orders_session=cookie-secret-value' },
        },
      );
      await a.http
        .get(
          `/graphql?query=${encodeURIComponent('query Q($id: ID!) { order(id: $id) { id } }')}&variables=${encodeURIComponent(JSON.stringify({ id: secretVariable }))}`,
        )
        .set({ authorization: `Bearer ${carol}`, accept: 'application/json' });
      const spans = await receiver.waitFor((all) => all.some((s) => s.traceId === marker.traceId && s.kind === SERVER));
      // The demo users' passwords are their names (their tokens came from real sign-ins on A, traced like the rest).
      const forbidden = [alice, carol, 'cookie-secret-value', secretVariable, 'orders-web-secret'];
      for (const span of spans) {
        for (const [key, value] of Object.entries({ ...span.attributes, ...span.resource })) {
          const text = JSON.stringify(value);
          for (const secret of forbidden) assert.ok(!text.includes(secret), `${span.name}: ${key} holds a secret`);
          assert.ok(
            value !== 'alice' && value !== 'carol' && !/password|token|cookie/i.test(key),
            `${span.name}: ${key}`,
          );
          if (key === 'db.query.text') {
            assert.doesNotMatch(text, /'/, `${span.name}: a quoted literal in ${text}`);
            assert.doesNotMatch(text, /(?<![$\w])\d/, `${span.name}: a number literal in ${text}`);
          }
        }
      }
      assert.ok(
        spans.some((s) => s.attributes['db.query.text']),
        'statements were checked',
      );
    });
  });
});

// ─── was __tests__/integration/expiry-sweep.test.ts ───
describe('expiry-sweep', () => {
  const SWEEP_LOCK = 7251006;

  describe('expired rows are swept', () => {
    let server: TestServer;
    let alice: string;
    beforeAll(async () => {
      server = await startTestServer({}, { replicated: true });
      alice = await server.token('alice');
    });
    afterAll(() => server?.close());

    const db = () => server.running.app.db;
    const createOrder = async (key: string) =>
      request(server.url)
        .post('/v1/orders')
        .set('authorization', `Bearer ${alice}`)
        .set('idempotency-key', key)
        .send({ items: [{ sku: 'DL-009', qty: 1 }] })
        .expect(201);
    const keys = async (...wanted: string[]) =>
      (
        await db().query<{ key: string }>(
          'select key from idempotency_keys where key in (select jsonb_array_elements_text($1::jsonb)) order by key',
          [JSON.stringify(wanted)],
        )
      ).map((r) => r.key);

    test('an idempotency key older than 24 hours is gone after a sweep; a fresh one stays', async () => {
      const [stale, fresh] = [`stale-${randomUUID()}`, `fresh-${randomUUID()}`];
      await createOrder(stale);
      await createOrder(fresh);
      await db().query(`update idempotency_keys set created_at = now() - interval '25 hours' where key = $1`, [stale]);

      assert.equal(await server.running.app.sweeper.runOnce(), true);
      assert.deepEqual(await keys(stale, fresh), [fresh]);
    });

    test('expired sessions, sign-ins and day-old order events go too; live ones stay', async () => {
      await request(server.running.publicUrl).get('/auth/login').expect(302);
      await request(server.running.publicUrl).get('/auth/login').expect(302);
      const before = (await db().query<{ id_hash: string }>('select id_hash from auth_login_attempts')).map(
        (r) => r.id_hash,
      );
      const expiring = { id_hash: before[0]! };
      await db().query(`update auth_login_attempts set expires_at = now() - interval '1 second' where id_hash = $1`, [
        expiring.id_hash,
      ]);
      const sessions = ['s-live', 's-expired', 's-revoked'];
      for (const id of sessions) {
        await db().query(
          `insert into auth_sessions (id_hash, subject, expires_at, revoked_at)
         values ($1, 'alice', now() + make_interval(secs => $2), case when $1 = 's-revoked' then now() end)`,
          [id, id === 's-expired' ? -1 : 3600],
        );
      }
      const [old] = await db().query<{ id: string }>(
        `insert into order_events (kind, order_id, customer_id, payload, created_at)
       values ('created', 'ord_old', 'cus_old', '{}', now() - interval '25 hours') returning id::text as id`,
      );
      // An event is kept until webhooks have turned it into messages (this one, unreadable, is passed over).
      await eventually('the webhook outbox cursor to pass the old event', async () => {
        const [cursor] = await db().query<{ last: string }>(
          'select last_event_id::text as last from webhook_outbox_cursor',
        );
        return BigInt(cursor!.last) >= BigInt(old!.id) || undefined;
      });

      assert.equal(await server.running.app.sweeper.runOnce(), true);

      const left = await db().query<{ id_hash: string }>(
        `select id_hash from auth_sessions where id_hash in ('s-live', 's-expired', 's-revoked')`,
      );
      assert.deepEqual(
        left.map((r) => r.id_hash),
        ['s-live'],
      );
      const attempts = await db().query<{ id_hash: string }>('select id_hash from auth_login_attempts');
      // The expired sign-in is gone; every live one (the second sign-in at least) stays.
      assert.deepEqual(attempts.map((a) => a.id_hash).sort(), before.slice(1).sort());
      assert.ok(before.length >= 2);
      assert.deepEqual(await db().query('select id from order_events where id = $1', [old!.id]), []);
    });

    // PostgreSQL only: embedded PGlite has one session, so nothing can hold the lock beside the app's own.
    (process.env.DATABASE_URL ? test : test.skip)(
      'while another replica holds the sweep lock, a sweep stands aside (PostgreSQL)',
      async () => {
        // Another replica, as PostgreSQL sees it: a session of its own holding the lock.
        const other = new pg.Client({ connectionString: process.env.DATABASE_URL });
        await other.connect();
        try {
          await other.query('select pg_advisory_lock($1)', [SWEEP_LOCK]);
          assert.equal(await server.running.app.sweeper.runOnce(), false);
          await other.query('select pg_advisory_unlock($1)', [SWEEP_LOCK]);
          assert.equal(await server.running.app.sweeper.runOnce(), true);
        } finally {
          await other.end();
        }
      },
    );

    // Embedded PGlite only: its one session runs one transaction at a time, so two replicas over it take turns.
    (process.env.DATABASE_URL ? test.skip : test)(
      'two replicas over the embedded database sweep one after the other: both sweeps complete (PGlite)',
      async () => {
        const replica = await startTestServer({}, { sameDatabaseAs: server });
        try {
          const results = await Promise.all([
            server.running.app.sweeper.runOnce(),
            replica.running.app.sweeper.runOnce(),
          ]);
          assert.deepEqual(results, [true, true]);
        } finally {
          await replica.close();
        }
      },
    );

    test('shutdown stops the sweeper and waits for a sweep in progress', async () => {
      const own = await startTestServer({ SWEEP_INTERVAL_S: '1' });
      const sweeping = own.running.app.sweeper.runOnce();
      await own.close();
      assert.equal(await sweeping, true);
    });
  });
});

// ─── was __tests__/integration/rate-budget-redis.test.ts ───
describe('rate-budget-redis', () => {
  function recordingLogger() {
    const lines: { level: string; event: unknown }[] = [];
    const log = (level: string) => (obj: { event?: unknown }) => lines.push({ level, event: obj.event });
    return { lines, warn: log('warn'), info: log('info') };
  }

  describe('rate budget and sign-in counters in Redis', () => {
    let server: RedisServer;
    let redis: Redis;

    beforeAll(async () => {
      server = await startRedis();
      redis = await openRedis(server.url, pino({ level: 'silent' }));
    });

    afterAll(async () => {
      redis.disconnect();
      await server.stop();
    });

    test('two budgets over one Redis spend from one pool per client', async () => {
      const a = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'shared' });
      const b = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'shared' });
      assert.equal((await a.charge('sub:alice', 7)).remaining, 3);
      const fromB = await b.charge('sub:alice', 3);
      assert.equal(fromB.allowed, true);
      assert.equal(fromB.remaining, 0);
      assert.equal((await a.charge('sub:alice', 1)).allowed, false);
      assert.equal((await b.charge('sub:bob', 1)).remaining, 9);
      const other = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'other-database' });
      assert.equal((await other.charge('sub:alice', 1)).remaining, 9, 'another deployment has budgets of its own');
    });

    test('a refused charge spends nothing and opens no window', async () => {
      const budget = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'refusals' });
      const tooBig = await budget.charge('ip:10.0.0.1', 11);
      assert.equal(tooBig.allowed, false);
      assert.equal(tooBig.remaining, 10);
      assert.equal(await redis.exists('orders-api:refusals:rate:ip:10.0.0.1'), 0);
      await budget.charge('ip:10.0.0.1', 8);
      assert.equal((await budget.charge('ip:10.0.0.1', 3)).allowed, false);
      assert.equal(await redis.get('orders-api:refusals:rate:ip:10.0.0.1'), '8');
      assert.equal((await budget.charge('ip:10.0.0.1', 2)).allowed, true);
    });

    test('every key expires with its window, so idle clients cost Redis nothing', async () => {
      const budget = createRateBudget({ points: 10, windowSeconds: 60, redis, namespace: 'expiry' });
      const charge = await budget.charge('sub:carol', 1);
      const ttl = await redis.pttl('orders-api:expiry:rate:sub:carol');
      assert.ok(ttl > 0 && ttl <= 60_000, `ttl ${ttl}`);
      assert.ok(charge.resetSeconds > 0 && charge.resetSeconds <= 60);
      const long = `sub:${'x'.repeat(500)}`;
      await budget.charge(long, 1);
      const keys = await redis.keys('orders-api:expiry:rate:*');
      assert.equal(keys.length, 2);
      assert.ok(
        keys.every((k) => k.length < 100),
        'long subjects are hashed into short keys',
      );
    });

    test('concurrent charges never overspend', async () => {
      const budget = createRateBudget({ points: 25, windowSeconds: 60, redis, namespace: 'race' });
      const results = await Promise.all(Array.from({ length: 40 }, () => budget.charge('sub:alice', 1)));
      assert.equal(results.filter((r) => r.allowed).length, 25);
    });

    test('sign-in failures are counted in Redis and lock across replicas', async () => {
      const one = createSigninThrottle({ redis, namespace: 'signin', logger: recordingLogger() });
      const two = createSigninThrottle({ redis, namespace: 'signin', logger: recordingLogger() });
      for (let i = 0; i < SIGNIN_LIMITS.user.lockAfter; i++) await (i % 2 ? one : two).begin('alice', '10.0.0.1');
      const locked = await one.begin('alice', '10.0.0.2');
      assert.equal(locked.locked, true);
      assert.equal(locked.locked && locked.retryAfterSeconds, SIGNIN_LIMITS.lockSeconds);
      const keys = await redis.keys('orders-api:signin:signin:*');
      assert.ok(keys.length >= 2);
      for (const key of keys) {
        assert.doesNotMatch(key, /alice/, 'user names do not reach Redis in clear');
        assert.ok((await redis.pttl(key)) > 0, 'every counter expires');
      }
    });

    test('when Redis goes away, requests are still answered from memory and the outage is logged once', async () => {
      const own = await startRedis();
      const client = await openRedis(own.url, pino({ level: 'silent' }));
      const logger = recordingLogger();
      const budget = createRateBudget({ points: 3, windowSeconds: 60, redis: client, namespace: 'outage', logger });
      const throttle = createSigninThrottle({ redis: client, namespace: 'outage', logger });
      assert.equal((await budget.charge('sub:alice', 1)).remaining, 2);
      const closed = once(client, 'close');
      await own.stop();
      await closed;
      const during = [await budget.charge('sub:alice', 1), await budget.charge('sub:alice', 1)];
      assert.ok(during.every((c) => c.allowed));
      assert.equal((await budget.charge('sub:alice', 5)).allowed, false, 'the in-process budget still limits');
      assert.deepEqual(await throttle.begin('bob', '10.0.0.1'), { locked: false, delayMs: 0 });
      assert.deepEqual(
        logger.lines.filter((l) => l.level === 'warn').map((l) => l.event),
        ['rate_limit.redis_unavailable', 'idp.throttle_redis_unavailable'],
      );
      client.disconnect();
    });
  });
});

// ─── was __tests__/integration/rate-budget-shared.test.ts ───
describe('rate-budget-shared', () => {
  const POINTS = 25;
  const LIST = '{ recentOrders(first: 5) { id } }';

  /** `"orders";r=12;t=3599` → 12 */
  function remaining(header: string | undefined): number {
    const match = /^"orders";r=(\d+);t=\d+$/.exec(header ?? '');
    assert.ok(match, `RateLimit header: ${header}`);
    return Number(match[1]);
  }

  describe('one rate budget per client across REST, GraphQL and replicas (Redis)', () => {
    let redis: RedisServer;
    let a: TestServer;
    let b: TestServer;

    beforeAll(async () => {
      redis = await startRedis();
      const env = { REDIS_URL: redis.url, RATE_LIMIT_POINTS: String(POINTS), RATE_LIMIT_WINDOW_S: '3600' };
      a = await startTestServer(env, { replicated: true });
      b = await startTestServer({ ...env, OIDC_ISSUER: a.running.app.issuer }, { sameDatabaseAs: a });
    });

    afterAll(async () => {
      await b?.close();
      await a?.close();
      await redis?.stop();
    });

    const graphql = (server: TestServer, token: string) =>
      request(server.url)
        .post('/graphql')
        .set('authorization', `Bearer ${token}`)
        .set('content-type', 'application/json')
        .send({ query: LIST });
    const restList = (server: TestServer, token: string) =>
      request(server.url).get('/v1/orders').set('authorization', `Bearer ${token}`);
    const restCreate = (server: TestServer, token: string) =>
      request(server.url)
        .post('/v1/orders')
        .set('authorization', `Bearer ${token}`)
        .set('idempotency-key', randomUUID())
        .send({ items: [{ sku: 'DL-009', qty: 1 }] });

    test('GraphQL cost on one replica and REST prices on the other spend the same budget, until both refuse', async () => {
      const alice = await a.token('alice');
      const first = await graphql(b, alice).expect(200);
      assert.equal(first.body.extensions.cost.requested, 1);
      assert.equal(first.body.extensions.cost.remaining, POINTS - 1);
      assert.equal(remaining(first.headers['ratelimit']), POINTS - 1);

      const listed = await restList(a, alice).expect(200);
      assert.equal(remaining(listed.headers['ratelimit']), POINTS - 2);
      await restCreate(a, alice).expect(201);
      await restCreate(a, alice).expect(201);

      const after = await graphql(b, alice).expect(200);
      assert.equal(after.body.extensions.cost.remaining, POINTS - 23);
      await graphql(b, alice).expect(200);
      await graphql(a, alice).expect(200);

      const refusedGraphql = await graphql(b, alice).expect(429);
      assert.equal(refusedGraphql.body.errors[0].extensions.code, 'RATE_LIMITED');
      assert.ok(Number(refusedGraphql.headers['retry-after']) > 0);
      const refusedRest = await restList(a, alice).expect(429);
      assert.equal(refusedRest.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.equal(refusedRest.body.code, 'RATE_LIMITED');
      assert.ok(Number(refusedRest.headers['retry-after']) > 0);

      // Another client's budget is its own.
      const bob = await a.token('bob');
      const bobs = await graphql(b, bob).expect(200);
      assert.equal(bobs.body.extensions.cost.remaining, POINTS - 1);
    });
  });
});
