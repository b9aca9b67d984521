import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { freePort } from '../helpers/infra.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlpReceiver.js';
import { startReplica, type Replica } from '../helpers/replica.js';
import { testDataDir } from '../helpers/testRun.js';

const HOOK = ['--import', new URL('../helpers/loadedModules.mjs', import.meta.url).pathname];

/** The modules a replica resolved in its lifetime, each with the module that asked (written by the hook at exit). */
const modulesOf = (file: string) =>
  (JSON.parse(readFileSync(file, 'utf8')) as [string, string | null][]).map(([url, parent]) => ({ url, parent }));

async function gql(url: string, query: string, token?: string) {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ query }),
  });
  return { status: res.status, body: (await res.json()) as { data?: Record<string, unknown>; errors?: unknown[] } };
}

async function metric(replica: Replica, name: string): Promise<number> {
  const text = await (await fetch(`${replica.metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

/** A collector that accepts connections and never answers: exports hang until their timeout. */
async function blackhole(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * The real process (src/main.ts), three times at once: tracing off, on (OTLP/JSON, resolver spans), and on with a
 * collector that never answers. Each records the modules it loads.
 */
describe('tracing in the server process', () => {
  const run = randomUUID();
  const files = { off: '', on: '' };
  const dirs: ReturnType<typeof testDataDir>[] = [];
  let receiver: OtlpReceiver;
  let hole: Awaited<ReturnType<typeof blackhole>>;
  let off: Replica;
  let on: Replica;
  let stuck: Replica;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    hole = await blackhole();
    files.off = path.join(tmpdir(), `orders-modules-off-${run}.json`);
    files.on = path.join(tmpdir(), `orders-modules-on-${run}.json`);
    const dataDir = () => {
      const dir = testDataDir();
      dirs.push(dir);
      return dir.dataDir;
    };
    [off, on, stuck] = await Promise.all([
      startReplica({ DATA_DIR: dataDir(), LOADED_MODULES_FILE: files.off }, { nodeArgs: HOOK }),
      startReplica(
        {
          DATA_DIR: dataDir(),
          LOADED_MODULES_FILE: files.on,
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_SERVICE_NAME: 'orders-api-json',
          OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test,team=orders%20team',
          OTEL_GRAPHQL_RESOLVER_SPANS: 'true',
          OTEL_BSP_SCHEDULE_DELAY: '20',
          REQUEST_LOG_SAMPLE: '1',
        },
        { nodeArgs: HOOK },
      ),
      startReplica({
        DATA_DIR: dataDir(),
        OTEL_EXPORTER_OTLP_ENDPOINT: hole.url,
        OTEL_EXPORTER_OTLP_TIMEOUT: '300',
        OTEL_BSP_SCHEDULE_DELAY: '10',
        OTEL_BSP_EXPORT_TIMEOUT: '1000',
        OTEL_BSP_MAX_QUEUE_SIZE: '16',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '8',
      }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([off?.stop(), on?.stop(), stuck?.stop()]);
    await hole?.close();
    await receiver?.close();
    for (const dir of dirs) dir.remove();
  });

  test('with no OTLP endpoint no OpenTelemetry module is loaded but the API prom-client requires; with one, the SDK is', async () => {
    const token = (await loginWithPkce({ issuer: `${off.url}/idp`, username: 'alice', password: 'alice' })).accessToken;
    assert.equal((await gql(off.url, '{ recentOrders(first: 5) { id customer { name } } }', token)).status, 200);
    const created = await fetch(`${off.url}/v1/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'idempotency-key': run },
      body: JSON.stringify({ items: [{ sku: 'WC-005', qty: 1 }] }),
    });
    assert.equal(created.status, 201);
    assert.equal(await off.stop(), 0);
    const loaded = modulesOf(files.off);
    assert.ok(
      loaded.some(({ url }) => url.includes('/node_modules/express/')),
      'the hook saw the app load',
    );
    // prom-client (the /metrics library, loaded whatever tracing says) requires OpenTelemetry's API package for its
    // exemplars: a no-op without an SDK. Nothing of ours asks for any OpenTelemetry module, and no SDK, exporter,
    // propagator or context manager is loaded.
    const otel = loaded.filter(({ url }) => url.includes('/node_modules/@opentelemetry/'));
    const outside = otel.filter(({ parent }) => !parent?.includes('/node_modules/@opentelemetry/api/'));
    assert.deepEqual(
      outside.map(({ parent }) => /\/node_modules\/([^/]+)\//.exec(parent ?? '')?.[1]),
      outside.map(() => 'prom-client'),
    );
    assert.deepEqual([...new Set(otel.map(({ url }) => /@opentelemetry\/([^/]+)/.exec(url)![1]))], ['api']);

    assert.equal((await gql(on.url, '{ products { sku } }')).status, 200);
    assert.equal(await on.stop(), 0);
    const withTracing = modulesOf(files.on);
    assert.ok(withTracing.some(({ url }) => url.includes('/node_modules/@opentelemetry/sdk-trace/')));
  });

  test('OTLP/JSON is accepted; OTEL_GRAPHQL_RESOLVER_SPANS adds a span per resolved field; the resource says who', async () => {
    // The replica was stopped by the test before: what it traced was exported as it shut down.
    const spans = receiver.spans();
    assert.ok(receiver.contentTypes().length > 0);
    assert.ok(receiver.contentTypes().every((type) => type.startsWith('application/json')));
    const operation = spans.find((s) => s.name === 'query' && s.attributes['graphql.operation.type'] === 'query');
    assert.ok(operation, 'the anonymous query’s operation span');
    const resolver = spans.find((s) => s.name === 'Query.products');
    assert.ok(resolver, 'a resolver span');
    assert.equal(resolver.traceId, operation.traceId);
    assert.equal(resolver.attributes['graphql.field.path'], 'products');
    assert.equal(operation.resource['service.name'], 'orders-api-json');
    assert.equal(operation.resource['team'], 'orders team');
    assert.equal(operation.resource['deployment.environment.name'], 'test');
    assert.equal(typeof operation.resource['service.instance.id'], 'string');
    // The request's log line carries the trace.
    const line = on.logs().find((l) => l.msg === 'request completed' && l.trace_id === operation.traceId);
    assert.ok(line, 'the log line of the traced request');
  });

  test('an unreachable collector costs nothing visible: requests succeed, the queue stays bounded, one warning', async () => {
    const burst = async (n: number) => {
      const statuses = await Promise.all(
        Array.from({ length: n }, () => gql(stuck.url, '{ products { sku } }').then((r) => r.status)),
      );
      assert.deepEqual(new Set(statuses), new Set([200]));
    };
    const warned = stuck.waitForLog((l) => String(l.msg).startsWith('trace export failed'), { seen: true });
    for (let i = 0; i < 5; i++) await burst(20);
    await warned;
    assert.equal(await metric(stuck, 'tracing_export_queue_capacity'), 16);
    assert.ok((await metric(stuck, 'tracing_export_queue_spans')) <= 16);
    assert.ok((await metric(stuck, 'tracing_spans_total{outcome="dropped"}')) > 0, 'spans past the queue are dropped');
    // More exports fail after the warning, and nothing more is said.
    const failedBefore = await metric(stuck, 'tracing_spans_total{outcome="failed"}');
    while ((await metric(stuck, 'tracing_spans_total{outcome="failed"}')) <= failedBefore) await burst(10);
    assert.equal(stuck.logs().filter((l) => String(l.msg).startsWith('trace export failed')).length, 1);
    assert.equal(stuck.logs().filter((l) => Number(l.level) >= 40).length, 1);
  });
});
