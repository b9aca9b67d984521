import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ChildMessage, CpuTime, ReadyMessage, RequestType } from './ipc.js';

const START_TIMEOUT_MS = 120_000;
const REQUEST_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

export interface ServerChild {
  readonly name: string;
  readonly ready: ReadyMessage;
  /** CPU time used by the child so far (µs). */
  cpu(): Promise<CpuTime>;
  request(type: RequestType): Promise<unknown>;
  /** Asks the child to close its server and pool; kills it if it has not exited in time. */
  stop(): Promise<void>;
}

/** Every child ever started, so that any exit path of the bench can stop them. */
const live = new Set<ServerChild>();

export function stopAllChildren(): Promise<void> {
  return Promise.all([...live].map((c) => c.stop())).then(() => undefined);
}

/**
 * Forks `bench/<script>` under tsx with its own event loop, and resolves once it has announced
 * where it listens. `nodeArgs` go to that child's node (e.g. heap flags).
 */
export async function startChild(
  name: string,
  script: string,
  env: Record<string, string | undefined>,
  nodeArgs: string[] = [],
): Promise<ServerChild> {
  const path = fileURLToPath(new URL(script, import.meta.url));
  const child: ChildProcess = fork(path, [], {
    execArgv: ['--import', 'tsx', ...nodeArgs],
    env: { ...process.env, ...env },
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

  function request(type: RequestType): Promise<unknown> {
    if (child.exitCode !== null || !child.connected) return Promise.reject(new Error(`${name} is not running`));
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name}: no answer to ${type}`)), REQUEST_TIMEOUT_MS);
      pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      child.send({ id, type });
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
