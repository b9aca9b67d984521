import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CONF = new URL('../../deploy/nginx.conf', import.meta.url).pathname;

export interface Nginx {
  /** http://127.0.0.1:PORT, the balancer's address: the replicas' PUBLIC_URL. */
  readonly url: string;
  /** Everything nginx logged at warn or above, to explain a failure (retries show here). */
  errorLog(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * deploy/nginx.conf itself, as compose uses it, with only what a test must change: the `listen` line, the two
 * `server appN:4000` upstream lines, and a pid file, logs and temp paths in a folder of the test's own.
 */
export async function renderNginxConf(port: number, upstreams: readonly [number, number], dir: string) {
  const source = await readFile(CONF, 'utf8');
  const replaced = { listen: 0, app1: 0, app2: 0 };
  const rendered = source
    .replace(/^(\s*)listen 8080;$/m, (_m, indent: string) => {
      replaced.listen++;
      return `${indent}listen 127.0.0.1:${port};`;
    })
    .replace(/server app([12]):4000/g, (_m, n: string) => {
      replaced[`app${n}` as 'app1' | 'app2']++;
      return `server 127.0.0.1:${upstreams[Number(n) - 1]}`;
    })
    .replace(/^events \{/m, `pid ${dir}/nginx.pid;\nerror_log ${dir}/error.log warn;\nevents {`)
    .replace(
      /^http \{/m,
      [
        'http {',
        `    access_log ${dir}/access.log;`,
        ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `    ${t}_temp_path ${dir}/${t};`),
      ].join('\n'),
    );
  // The config's shape is what the test relies on: say so plainly if someone changes it.
  if (replaced.listen !== 1 || replaced.app1 !== 1 || replaced.app2 !== 1)
    throw new Error(`deploy/nginx.conf no longer has one "listen 8080;" and one "server appN:4000" per replica`);
  return rendered;
}

/** Debian's nginx in the foreground on deploy/nginx.conf, in front of two replicas on loopback ports. */
export async function startNginx(opts: { port: number; upstreams: readonly [number, number] }): Promise<Nginx> {
  const dir = await mkdtemp(join(tmpdir(), 'orders-nginx-'));
  // Worker processes drop root for nobody: they must be able to write their temp files and logs here.
  await chmod(dir, 0o777);
  for (const t of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) await mkdir(join(dir, t), { mode: 0o777 });
  await writeFile(join(dir, 'nginx.conf'), await renderNginxConf(opts.port, opts.upstreams, dir));
  const child: ChildProcess = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit');
  // Ready once its port accepts a connection; an exit first is a broken config or a taken port.
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}: ${stderr}`);
    const accepted = await new Promise<boolean>((resolve) => {
      const socket = connect(opts.port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (accepted) break;
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 50))]);
  }
  return {
    url: `http://127.0.0.1:${opts.port}`,
    errorLog: () => readFile(join(dir, 'error.log'), 'utf8').catch(() => ''),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * What a production replica behind the balancer is given, as compose gives it (an issuer in another process, the
 * public URL the balancer's, the proxy it trusts), on the suite's own cluster and Redis: the topology tests and
 * `npm run bench -- --topology` add what each measures to it.
 */
export function behindBalancerEnv(opts: {
  databaseUrl: string;
  redisUrl: string;
  issuer: string;
  balancerPort: number;
  /** TRUST_PROXY: compose's `1`, or nginx's own address. */
  trustProxy: string;
}): Record<string, string> {
  return {
    NODE_ENV: 'production',
    DATABASE_URL: opts.databaseUrl,
    REDIS_URL: opts.redisUrl,
    OIDC_ISSUER: opts.issuer,
    OIDC_CLIENT_ID: 'orders-web',
    OIDC_CLIENT_SECRET: 'orders-web-secret',
    OIDC_ALLOW_HTTP: 'true',
    PUBLIC_URL: `http://127.0.0.1:${opts.balancerPort}`,
    TRUST_PROXY: opts.trustProxy,
  };
}
