import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IMAGE_ALLOCATOR } from './allocator.js';
import { dropSchema } from './data.js';
import type { ChildMessage, CpuTime, ReadyMessage, RequestType } from './ipc.js';

const START_TIMEOUT_MS = 120_000;
const REQUEST_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

export interface ServerChild {
  readonly name: string;
  readonly ready: ReadyMessage;
  /** CPU time used by the child so far (µs). */
  cpu(): Promise<CpuTime>;
  request(type: RequestType, arg?: unknown): Promise<unknown>;
  /** Asks the child to close its server and pool; kills it if it has not exited in time. */
  stop(): Promise<void>;
}

/** Every child ever started, so that any exit path of the bench can stop them. */
const live = new Set<ServerChild>();

export function stopAllChildren(): Promise<void> {
  return Promise.all([...live].map((c) => c.stop())).then(() => undefined);
}

/** The server children's scripts, built to JavaScript by buildChildren. */
const BUILT_CHILDREN = [
  'appServer.ts',
  'floor.ts',
  'fanoutFloor.ts',
  'peers/mercurius.ts',
  'peers/yoga.ts',
  'peers/apollo.ts',
  'peers/apolloMinimal.ts',
];
const builtDir = fileURLToPath(new URL('./results/children/', import.meta.url));
let built = false;

/**
 * Builds the server children (the app's harness, the floors, the peers) to JavaScript with esbuild, so that they run
 * on plain node as production does: under tsx, every `require()` a dependency makes while serving (Apollo's
 * createHash requires `crypto` on every request) goes through tsx's resolver hooks, which cost the compiled app 1.5–3
 * % of its CPU in the profiles. Packages stay external; the app itself is imported from dist/ at run time.
 */
export async function buildChildren(): Promise<void> {
  const { build } = await import('esbuild');
  await build({
    entryPoints: BUILT_CHILDREN.map((s) => fileURLToPath(new URL(s, import.meta.url))),
    outdir: builtDir,
    outbase: fileURLToPath(new URL('.', import.meta.url)),
    outExtension: { '.js': '.mjs' },
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node22',
    logLevel: 'warning',
  });
  built = true;
}

/**
 * Forks `bench/<script>` with its own event loop (the JavaScript buildChildren made of it, on plain node, when
 * there is one; else under tsx), and resolves once it has announced where it listens. `nodeArgs` go to that
 * child's node (e.g. heap flags).
 */
export async function startChild(
  name: string,
  script: string,
  env: Record<string, string | undefined>,
  nodeArgs: string[] = [],
): Promise<ServerChild> {
  const relative = script.replace(/^\.\//, '');
  const js = built && BUILT_CHILDREN.includes(relative);
  const path = js ? join(builtDir, relative.replace(/\.ts$/, '.mjs')) : fileURLToPath(new URL(script, import.meta.url));
  // BENCH_CHILD_ARGS: node flags for every server child but the floors, e.g. `--trace-gc-nvp` (what each collection
  // copied and promoted: bench/README.md, "Objects that outlive their request").
  const extra = process.env.BENCH_CHILD_ARGS?.split(' ').filter(Boolean) ?? [];
  if (extra.length && name !== 'floor') nodeArgs = [...nodeArgs, ...extra];
  const child: ChildProcess = fork(path, [], {
    execArgv: js ? nodeArgs : ['--import', 'tsx', ...nodeArgs],
    env: { ...process.env, ...IMAGE_ALLOCATOR.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const ready = await new Promise<ReadyMessage>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name}: not ready after ${START_TIMEOUT_MS} ms`)),
      START_TIMEOUT_MS,
    );
    child.on('message', (m: ChildMessage) => {
      if (!('type' in m)) return;
      clearTimeout(timer);
      if (m.type === 'ready') resolve(m);
      else reject(new Error(`${name} failed to start:\n${m.error}`));
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with code ${code} before it was ready`));
    });
  }).catch((error: unknown) => {
    child.kill('SIGKILL');
    throw error;
  });

  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  child.on('message', (m: ChildMessage) => {
    if (!('id' in m)) return;
    const waiter = pending.get(m.id);
    pending.delete(m.id);
    if (m.ok) waiter?.resolve(m.value);
    else waiter?.reject(new Error(`${name}: ${m.error}`));
  });
  void exited.then(() => {
    for (const w of pending.values()) w.reject(new Error(`${name} exited`));
    pending.clear();
  });

  function request(type: RequestType, arg?: unknown): Promise<unknown> {
    if (child.exitCode !== null || !child.connected) return Promise.reject(new Error(`${name} is not running`));
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name}: no answer to ${type}`)), REQUEST_TIMEOUT_MS);
      pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      child.send(arg === undefined ? { id, type } : { id, type, arg });
    });
  }

  let stopping: Promise<void> | null = null;
  const handle: ServerChild = {
    name,
    ready,
    request,
    cpu: () => request('cpu') as Promise<CpuTime>,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
          await request('stop').catch(() => child.kill('SIGTERM'));
          await exited;
          clearTimeout(timer);
        }
        live.delete(handle);
      })();
      return stopping;
    },
  };
  live.add(handle);
  return handle;
}

/**
 * The one way a bench run ends: `first` (whatever the caller opened itself), then every child
 * server, then the schema. Runs once however often it is called, and on SIGINT/SIGTERM (exit 130).
 */
export function cleanupOnce(opts: {
  databaseUrl: string;
  schema: string;
  /** Leave the schema in place (npm run bench -- --schema). */
  keep?: boolean;
  log: (message: string) => void;
  first?: () => Promise<void>;
}): () => Promise<void> {
  const { databaseUrl, schema, log } = opts;
  let cleaning: Promise<void> | null = null;
  const cleanup = () => {
    cleaning ??= (async () => {
      await opts.first?.().catch((e: unknown) => log(`cleaning up: ${String(e)}`));
      await stopAllChildren().catch((e: unknown) => log(`stopping servers: ${String(e)}`));
      if (opts.keep) return log(`kept schema ${schema} (--schema): drop it when done`);
      await dropSchema(databaseUrl, schema)
        .then(() => log(`dropped schema ${schema}`))
        .catch((e: unknown) => log(`could not drop schema ${schema}: ${String(e)}`));
    })();
    return cleaning;
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      log(`${signal}: stopping the servers and dropping the schema`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  return cleanup;
}
