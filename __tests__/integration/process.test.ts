import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { request, type IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { http } from '../helpers/http.js';
import { testDataDir } from '../helpers/testRun.js';

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
  return spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: ROOT, env: childEnv(env) });
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
      .set({ 'content-type': 'application/json', authorization: `Bearer ${accessToken}`, 'x-request-id': 'trace-123' })
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
