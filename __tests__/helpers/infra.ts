import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chown, mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A free TCP port on 127.0.0.1: listen on 0, read the port, close. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

async function postgresBin(name: string): Promise<string> {
  const versions = (await readdir('/usr/lib/postgresql')).sort((a, b) => Number(b) - Number(a));
  if (!versions.length) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql');
  return `/usr/lib/postgresql/${versions[0]}/bin/${name}`;
}

export interface PostgresCluster {
  /** postgres://postgres@127.0.0.1:PORT/postgres (trust authentication, test only). */
  readonly url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops it and deletes its files. */
  destroy(): Promise<void>;
}

/**
 * A throw-away PostgreSQL cluster of this test's own (initdb on a free port), so that stopping it
 * never touches the shared server. initdb refuses root, so as root it runs as the postgres user.
 */
export async function startPostgres(): Promise<PostgresCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'orders-pg-'));
  const data = join(dir, 'data');
  const port = await freePort();
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const uid = Number(stdout.trim());
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(dir, uid, Number(gid.trim()));
  }
  const pg = async (bin: string, args: string[]) => {
    const path = await postgresBin(bin);
    await (asRoot ? run('runuser', ['-u', 'postgres', '--', path, ...args]) : run(path, args));
  };
  await pg('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off`;
  const start = () => pg('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', 'start']);
  const stop = () => pg('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
  await start();
  let running = true;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async stop() {
      await stop();
      running = false;
    },
    async start() {
      await start();
      running = true;
    },
    async destroy() {
      if (running) await stop();
      running = false;
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

/** A redis-server of this test's own on a free port, without persistence; stopped by its pid. */
export async function startRedis(opts: { port?: number; started?: boolean } = {}): Promise<RedisServer> {
  const port = opts.port ?? (await freePort());
  let child: ChildProcess | null = null;
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      const proc = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      child = proc;
      await new Promise<void>((resolve, reject) => {
        let out = '';
        proc.stdout!.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('Ready to accept connections')) resolve();
        });
        proc.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${out}`)));
      });
      proc.stdout!.resume();
    },
    async stop() {
      const proc = child;
      child = null;
      if (!proc || proc.exitCode !== null) return;
      const exited = once(proc, 'exit');
      proc.kill('SIGTERM');
      await exited;
    },
  };
  if (opts.started !== false) await server.start();
  return server;
}
