// The tests that run the server in a process of its own, in one Jest file: a file loads its modules into a fresh
// context and costs about 1.5 s of CPU before its first test (docs/testing.md#how-long-it-takes). Each top-level
// describe block below was a test file of its own, named after it (the comment above it gives the old file name), with
// its tests unchanged, starting the servers it starts; none shares a server with another block.
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { type IncomingMessage, request } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import WebSocket from 'ws';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { http } from '../helpers/http.js';
import { freePort } from '../helpers/infra.js';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlpReceiver.js';
import { type Replica, startReplica } from '../helpers/replica.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { appProcessArgs, testDataDir } from '../helpers/testRun.js';

// ─── was __tests__/integration/process.test.ts ───
describe('process', () => {
  const ROOT = new URL('../../', import.meta.url).pathname;

  function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
    // METRICS_PORT: the default 9464 may be taken by anything else on the machine; tests never need a port free.
    const env: NodeJS.ProcessEnv = { ...process.env, METRICS_PORT: '0', ...extra };
    // This test is about the process; the database behaviour is covered against both engines elsewhere.
    delete env.DATABASE_URL;
    delete env.REDIS_URL;
    delete env.NODE_OPTIONS;
    return env;
  }

  function spawnMain(env: Record<string, string>): ChildProcessWithoutNullStreams {
    return spawn(process.execPath, appProcessArgs(), { cwd: ROOT, env: childEnv(env) });
  }

  /** Collects stdout and resolves when a log line matching `msg` appears. */
  function logWatcher(child: ChildProcessWithoutNullStreams) {
    let text = '';
    const waiters: { msg: string; resolve: (line: Record<string, unknown>) => void }[] = [];
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      for (const line of text.split('\n')) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as Record<string, unknown>;
        for (const w of waiters.filter((w) => entry.msg === w.msg)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(entry);
        }
      }
    });
    return {
      waitFor: (msg: string) => new Promise<Record<string, unknown>>((resolve) => waiters.push({ msg, resolve })),
      /** Resolves once the log holds a line matching `pattern` (at once if it already does). */
      waitForText: (pattern: RegExp) =>
        new Promise<void>((resolve) => {
          const check = () => {
            if (!pattern.test(text)) return;
            child.stdout.off('data', check);
            resolve();
          };
          child.stdout.on('data', check);
          check();
        }),
      all: () => text,
    };
  }

  describe('the server process', () => {
    let child: ChildProcessWithoutNullStreams;
    const dataDir = testDataDir();
    let logs: ReturnType<typeof logWatcher>;
    let stderr = '';
    let url: string;
    beforeAll(async () => {
      child = spawnMain({
        PORT: '0',
        DATA_DIR: dataDir.dataDir,
        LOG_LEVEL: 'info',
        // Successful requests are logged at info only when sampled: every one of them here.
        REQUEST_LOG_SAMPLE: '1',
        NODE_ENV: 'development',
      });
      logs = logWatcher(child);
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const started = await logs.waitFor('orders-api listening');
      url = String(started.url);
    });
    afterAll(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      }
      dataDir.remove();
    });

    test('answers /healthz and /readyz', async () => {
      const health = await http(url).get('/healthz');
      assert.equal(health.status, 200);
      assert.deepEqual(health.body, { status: 'ok' });
      const ready = await http(url).get('/readyz');
      assert.equal(ready.status, 200);
      assert.deepEqual(ready.body, { status: 'ready' });
    });

    test('a WebSocket frame over the 64 KiB limit closes the socket with 1009 and logs one line, no stack trace', async () => {
      const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
      await once(ws, 'open');
      const closed = once(ws, 'close') as Promise<[number, Buffer]>;
      ws.send('x'.repeat(64 * 1024 + 1));
      const [code] = await closed;
      assert.equal(code, 1009);
      await logs.waitForText(/"msg":"WebSocket closed: Max payload size exceeded"/);
      const line = logs
        .all()
        .split('\n')
        .find((l) => l.includes('"msg":"WebSocket closed: Max payload size exceeded"'))!;
      assert.equal(JSON.parse(line).level, 40);
      assert.equal(JSON.parse(line).code, 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH');
      // Nothing outside the JSON log: no console.error, no stack frame anywhere.
      assert.doesNotMatch(logs.all(), /\n\s+at /);
      assert.doesNotMatch(stderr, /Internal error|\s+at /);
      for (const l of logs.all().split('\n').filter(Boolean)) assert.match(l, /^\{.*\}$/);
    });

    test('echoes a request id and logs requests without credentials', async () => {
      const { accessToken } = await loginWithPkce({ issuer: `${url}/idp`, username: 'alice', password: 'alice' });
      const res = await http(url)
        .post('/graphql')
        .set({
          'content-type': 'application/json',
          authorization: `Bearer ${accessToken}`,
          'x-request-id': 'trace-123',
        })
        .send(JSON.stringify({ query: '{ recentOrders(first: 1) { id } }' }));
      assert.equal(res.status, 200);
      assert.equal(res.get('x-request-id'), 'trace-123');
      await logs.waitForText(/"id":"trace-123"[^\n]*"msg":"request completed"/);
      assert.match(logs.all(), /"id":"trace-123"/);
      assert.doesNotMatch(logs.all(), new RegExp(accessToken.split('.')[2]!));
      assert.doesNotMatch(logs.all(), /"password"\s*:\s*"alice"/);
    });

    test('on SIGTERM it finishes the request in flight, then exits 0', async () => {
      const body = JSON.stringify({ query: '{ products { sku } }' });
      // Expect: 100-continue makes the server say when it has the request: it is then in flight, its body pending.
      const req = request(`${url}/graphql`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          expect: '100-continue',
        },
      });
      const response = once(req, 'response');
      req.flushHeaders();
      await once(req, 'continue');
      req.write(body.slice(0, 10));
      child.kill('SIGTERM');
      await logs.waitFor('draining');
      req.end(body.slice(10));
      const [res] = (await response) as [IncomingMessage];
      let text = '';
      for await (const chunk of res) text += String(chunk);
      assert.equal(res.statusCode, 200);
      assert.equal((JSON.parse(text) as { data: { products: unknown[] } }).data.products.length, 20);
      const [code] = await once(child, 'exit');
      assert.equal(code, 0);
      assert.match(logs.all(), /"msg":"stopped"/);
    });
  });

  describe('start-up with a bad configuration', () => {
    test('lists every problem and exits 1', async () => {
      const child = spawnMain({ NODE_ENV: 'production', PORT: 'abc', LOG_LEVEL: 'chatty' });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const [code] = await once(child, 'exit');
      assert.equal(code, 1);
      assert.match(stderr, /Invalid configuration:/);
      assert.match(stderr, /PORT: /);
      assert.match(stderr, /LOG_LEVEL: /);
      assert.match(stderr, /OIDC_ISSUER: is required in production/);
      assert.match(stderr, /DATABASE_URL: is required in production/);
    });
  });
});

// ─── was __tests__/integration/tracing-process.test.ts ───
describe('tracing-process', () => {
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
      const token = (await loginWithPkce({ issuer: `${off.url}/idp`, username: 'alice', password: 'alice' }))
        .accessToken;
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
      assert.ok(
        (await metric(stuck, 'tracing_spans_total{outcome="dropped"}')) > 0,
        'spans past the queue are dropped',
      );
      // More exports fail after the warning, and nothing more is said.
      const failedBefore = await metric(stuck, 'tracing_spans_total{outcome="failed"}');
      while ((await metric(stuck, 'tracing_spans_total{outcome="failed"}')) <= failedBefore) await burst(10);
      assert.equal(stuck.logs().filter((l) => String(l.msg).startsWith('trace export failed')).length, 1);
      assert.equal(stuck.logs().filter((l) => Number(l.level) >= 40).length, 1);
    });
  });
});

// ─── was __tests__/integration/dev-ergonomics.test.ts ───
describe('dev-ergonomics', () => {
  const ROOT = new URL('../../', import.meta.url).pathname;

  /** The real process on a pseudo-terminal (util-linux `script`), as `npm start` in a terminal; its output until `until`. */
  function startOnTerminal(until: RegExp): Promise<string> {
    const dataDir = testDataDir();
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', METRICS_PORT: 'off', DATA_DIR: dataDir.dataDir };
    env.NODE_ENV = 'development';
    delete env.NODE_OPTIONS;
    delete env.DATABASE_URL;
    delete env.REDIS_URL;
    const child = spawn('script', ['-qefc', [process.execPath, ...appProcessArgs()].join(' '), '/dev/null'], {
      cwd: ROOT,
      env,
      detached: true,
    });
    return new Promise<string>((resolve, reject) => {
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (until.test(output)) process.kill(-child.pid!, 'SIGTERM');
      });
      child.on('close', () => {
        dataDir.remove();
        if (until.test(output)) resolve(output);
        else reject(new Error(`the process ended before printing ${until}: ${output}`));
      });
    });
  }

  describe('small things a developer meets first', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer();
    });
    afterAll(() => server?.close());

    test('GET /favicon.ico is an empty 204 a browser may cache, not a 404', async () => {
      const res = await server.http.get('/favicon.ico');
      assert.equal(res.status, 204);
      assert.equal(res.text, '');
      assert.equal(res.get('cache-control'), 'public, max-age=86400');
    });

    test('DateTime keeps the description schema.graphql gives it, and its specifiedByURL', async () => {
      const res = await server.gql('{ __type(name: "DateTime") { kind description specifiedByURL } }');
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.data, {
        __type: {
          kind: 'SCALAR',
          description: 'An instant in time, as an RFC 3339 / ISO 8601 string in UTC, e.g. `2026-11-22T09:30:00.000Z`.',
          specifiedByURL: 'https://www.rfc-editor.org/rfc/rfc3339',
        },
      });
    });

    test('on a terminal outside production the log is pino-pretty lines, not JSON', async () => {
      const output = await startOnTerminal(/orders-api listening/);
      // eslint-disable-next-line no-control-regex -- pino-pretty colours a terminal's output
      const plain = output.replace(/\u001b\[[\d;]*m/g, '');
      assert.match(plain, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: orders-api listening \{/m);
      assert.doesNotMatch(plain, /^\{"level":/m);
    });
  });
});
