import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { freePort } from './infra.js';
import { appProcessArgs } from './testRun.js';

const ROOT = new URL('../../', import.meta.url).pathname;

type LogEntry = Record<string, unknown> & { msg?: string };

export interface Replica {
  /** Where this process listens directly: http://127.0.0.1:PORT. */
  readonly url: string;
  readonly port: number;
  /** Where its GET /metrics answers (a free METRICS_PORT unless the test names one), from its start-up log. */
  readonly metricsUrl: string | undefined;
  readonly child: ChildProcessWithoutNullStreams;
  /** Resolves with the first log entry (from now on, or already seen when `seen`) that matches. */
  waitForLog(match: (entry: LogEntry) => boolean, opts?: { seen?: boolean }): Promise<LogEntry>;
  logs(): readonly LogEntry[];
  /** Sends the signal and resolves with the exit code (null when killed by the signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * The real server as a child process (the run's build of src/main.ts: testRun.ts appProcessArgs), on a port of its
 * own, so that a test can signal, kill and restart it. The environment is this test's alone: the CI's shared
 * DATABASE_URL and REDIS_URL are never inherited.
 */
export async function startReplica(env: Record<string, string>, opts: ReplicaOptions = {}): Promise<Replica> {
  if (opts.port !== undefined) return startOn(opts.port, env, opts);
  // The port must be known before the start (it is the IdP's issuer, PUBLIC_URL), so it is one the kernel just gave
  // out and took back: any process's outgoing connection can take it in between. Then the start fails with
  // EADDRINUSE before anything is served, and another port is tried.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOn(await freePort(), env, opts);
    } catch (error) {
      if (attempt === PORT_ATTEMPTS || !(error instanceof PortTaken)) throw error;
    }
  }
}

const PORT_ATTEMPTS = 3;

class PortTaken extends Error {}

interface ReplicaOptions {
  port?: number;
  /** Another build to run instead: `node <entry>` in `cwd` (the production path, dist/). */
  build?: { cwd: string; entry: string };
  /** Node options before the entry point (an `--import` of a test's own hooks). */
  nodeArgs?: readonly string[];
}

async function startOn(port: number, env: Record<string, string>, opts: ReplicaOptions): Promise<Replica> {
  const url = `http://127.0.0.1:${port}`;
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['DATABASE_URL', 'DATABASE_SCHEMA', 'REDIS_URL', 'NODE_OPTIONS', 'PUBLIC_URL', 'OIDC_ISSUER'])
    delete childEnv[name];
  const args = [...(opts.nodeArgs ?? []), ...(opts.build ? [opts.build.entry] : appProcessArgs())];
  const child = spawn(process.execPath, args, {
    cwd: opts.build?.cwd ?? ROOT,
    env: {
      ...childEnv,
      NODE_ENV: 'test',
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_URL: url,
      LOG_LEVEL: 'info',
      METRICS_PORT: '0',
      ...env,
    },
  });
  const entries: LogEntry[] = [];
  const waiters: { match: (e: LogEntry) => boolean; resolve: (e: LogEntry) => void }[] = [];
  let partial = '';
  child.stdout.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      const entry = JSON.parse(line) as LogEntry;
      entries.push(entry);
      for (const w of waiters.filter((w) => w.match(entry))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(entry);
      }
    }
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;

  let metricsUrl: string | undefined;
  const replica: Replica = {
    url,
    port,
    get metricsUrl() {
      return metricsUrl;
    },
    child,
    waitForLog(match, { seen = false } = {}) {
      const earlier = seen ? entries.find(match) : undefined;
      if (earlier) return Promise.resolve(earlier);
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
    logs: () => entries,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const [code] = await exited;
      return code;
    },
  };
  const started = await Promise.race([
    replica.waitForLog((e) => e.msg === 'orders-api listening' || e.msg === 'start-up failed'),
    exited.then(([code]) => ({ msg: `exited with ${code}` }) as LogEntry),
  ]);
  if (started.msg !== 'orders-api listening') {
    const message = `replica on ${port} did not start (${started.msg}): ${stderr}${JSON.stringify(started)}`;
    const err = started.err as { code?: unknown } | undefined;
    if (err?.code === 'EADDRINUSE') {
      await replica.stop('SIGKILL');
      throw new PortTaken(message);
    }
    throw new Error(message);
  }
  if (typeof started.metrics === 'string' && started.metrics !== 'off') metricsUrl = started.metrics;
  return replica;
}
