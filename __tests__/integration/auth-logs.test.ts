import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { WebClient, location, signInAtIdp, startLogin } from '../helpers/webClient.js';

const ROOT = new URL('../../', import.meta.url).pathname;

/** The real process with its real logger (redaction included), logging everything down to debug. */
function spawnMain(): ChildProcessWithoutNullStreams {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    DATA_DIR: 'memory',
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
  let output = '';
  let base: string;

  before(async () => {
    child = spawnMain();
    base = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const listening = /"url":"([^"]+)"[^\n]*"msg":"orders-api listening"/.exec(output);
        if (listening) resolve(listening[1]!);
      });
      child.once('exit', (code) => reject(new Error(`the process exited with ${code}: ${output}`)));
    });
  });
  after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
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
    const logout = location(await browser.post(`${base}/auth/logout`));

    const secrets = {
      state: authorization.searchParams.get('state')!,
      nonce: authorization.searchParams.get('nonce')!,
      code: callback.searchParams.get('code')!,
      loginCookie,
      sessionCookie,
      idToken: logout.searchParams.get('id_token_hint')!,
    };
    for (const [name, value] of Object.entries(secrets)) assert.ok(value && value.length >= 20, name);

    await new Promise((resolve) => setTimeout(resolve, 200));
    const lines = output.split('\n').filter((l) => l.startsWith('{'));
    assert.ok(lines.some((l) => l.includes('"event":"auth.login"') && l.includes('"sub":"alice"')));
    assert.ok(lines.some((l) => l.includes('"url":"/auth/callback?code=[redacted]&state=[redacted]')));
    for (const [name, value] of Object.entries(secrets)) {
      assert.equal(
        lines.find((l) => l.includes(value)),
        undefined,
        `the ${name} appears in the log`,
      );
    }
  });
});
