import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { testDataDir } from '../helpers/testRun.js';
import { WebClient, location, signInAtIdp, startLogin } from '../helpers/webClient.js';

const ROOT = new URL('../../', import.meta.url).pathname;

/** The real process with its real logger (redaction included), logging everything down to debug. */
function spawnMain(dataDir: string): ChildProcessWithoutNullStreams {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    // The default 9464 may be taken by anything else on the machine: tests never depend on a port being free.
    METRICS_PORT: '0',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'debug',
    NODE_ENV: 'development',
  };
  // Logging does not depend on the database engine; the embedded defaults keep this test self-contained.
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  delete env.NODE_OPTIONS;
  return spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: ROOT, env });
}

describe('browser sign-in in the logs', () => {
  let child: ChildProcessWithoutNullStreams;
  const dataDir = testDataDir();
  let output = '';
  let base: string;
  const onOutput = new Set<() => void>();

  /** Resolves with the first match of `pattern` in the log, as soon as it has been written. */
  const logged = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve) => {
      const check = () => {
        const match = pattern.exec(output);
        if (!match) return;
        onOutput.delete(check);
        resolve(match);
      };
      onOutput.add(check);
      check();
    });

  beforeAll(async () => {
    child = spawnMain(dataDir.dataDir);
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      for (const check of [...onOutput]) check();
    });
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code) => reject(new Error(`the process exited with ${code}: ${output}`))),
    );
    const listening = await Promise.race([logged(/"url":"([^"]+)"[^\n]*"msg":"orders-api listening"/), exited]);
    base = listening[1]!;
  });
  afterAll(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
    dataDir.remove();
  });

  test('never contain the code, state, nonce, tokens, or cookie values of a sign-in', async () => {
    const browser = new WebClient();
    const authorization = await startLogin(browser, base, '/auth/session');
    const loginCookie = browser.cookie(base, 'orders_login')!;
    const callback = await signInAtIdp(browser, authorization, 'alice');
    const done = await browser.get(callback);
    assert.equal(done.status, 303);
    const sessionCookie = browser.cookie(base, 'orders_session')!;
    assert.equal((await browser.graphql(base, '{ viewer { subject } }')).status, 200);
    const csrfToken = ((await (await browser.get(`${base}/auth/session`)).json()) as { csrfToken: string }).csrfToken;
    const logout = location(await browser.post(`${base}/auth/logout`, { csrf: csrfToken }));

    const secrets = {
      state: authorization.searchParams.get('state')!,
      nonce: authorization.searchParams.get('nonce')!,
      code: callback.searchParams.get('code')!,
      loginCookie,
      sessionCookie,
      idToken: logout.searchParams.get('id_token_hint')!,
      csrfToken,
    };
    for (const [name, value] of Object.entries(secrets)) assert.ok(value && value.length >= 20, name);

    // The logout is the last request: once its line is written, so are those of every request before it.
    await logged(/"url":"\/auth\/logout"[^\n]*"msg":"request completed"/);
    const lines = output.split('\n').filter((l) => l.startsWith('{'));
    assert.ok(lines.some((l) => l.includes('"event":"auth.login"') && l.includes('"sub":"alice"')));
    assert.ok(lines.some((l) => l.includes('"url":"/auth/callback?code=[redacted]&state=[redacted]')));
    // Without a query string there is nothing to redact, and the log does not pretend otherwise.
    const logoutLines = lines.filter((l) => l.includes('"url":"/auth/logout"'));
    assert.ok(logoutLines.length);
    for (const line of logoutLines) assert.doesNotMatch(line, /"query":/);
    for (const [name, value] of Object.entries(secrets)) {
      assert.equal(
        lines.find((l) => l.includes(value)),
        undefined,
        `the ${name} appears in the log`,
      );
    }
  });
});
