import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient } from 'graphql-ws';
import WebSocket from 'ws';
import { createLogger } from '../../src/logger.js';
import { startRedis, type RedisServer } from '../helpers/infra.js';
import { rest } from '../helpers/openapi.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlpReceiver.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhookReceiver.js';

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
    a = await startTestServer(env, { logger });
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

    const spans = (await receiver.waitFor((all) => all.some((s) => s.traceId === traceId && s.kind === SERVER))).filter(
      (s) => s.traceId === traceId,
    );
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
