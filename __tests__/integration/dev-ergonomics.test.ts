import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { testDataDir } from '../helpers/testRun.js';

const ROOT = new URL('../../', import.meta.url).pathname;

/** The real process on a pseudo-terminal (util-linux `script`), as `npm start` in a terminal; its output until `until`. */
function startOnTerminal(until: RegExp): Promise<string> {
  const dataDir = testDataDir();
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', METRICS_PORT: 'off', DATA_DIR: dataDir.dataDir };
  env.NODE_ENV = 'development';
  delete env.NODE_OPTIONS;
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  const child = spawn('script', ['-qefc', `${process.execPath} --import tsx src/main.ts`, '/dev/null'], {
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
