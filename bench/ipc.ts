/**
 * The small protocol between the bench (parent) and each server child over Node's fork IPC
 * channel: the child announces where it listens, then answers numbered requests (CPU time so
 * far, memory after a full GC, profiler start/stop, stop). Servers run in children so that the
 * app, the floor and the load generator never share an event loop.
 */

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReadyMessage {
  readonly type: 'ready';
  readonly url: string;
  /** Where the server's Prometheus text is: the app's METRICS_PORT, or the floor's own URL. */
  readonly metricsUrl?: string;
  /** The embedded IdP's issuer (app child only). */
  readonly issuer?: string;
}

export interface FailedMessage {
  readonly type: 'failed';
  readonly error: string;
}

export type RequestType =
  | 'cpu'
  | 'memory'
  | 'profile-start'
  | 'profile-stop'
  | 'stop'
  | 'broadcast'
  /** The app's SQL statements sent for /graphql requests (null from a server that does not count them). */
  | 'request-statements';

export interface RequestMessage {
  readonly id: number;
  readonly type: RequestType;
  /** What the request is about, for the requests that need it (the fan-out floor's `broadcast`). */
  readonly arg?: unknown;
}

export type ReplyMessage =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: string };

export type ChildMessage = ReadyMessage | FailedMessage | ReplyMessage;

/** CPU time the child has used so far, in microseconds (process.cpuUsage()). */
export interface CpuTime {
  readonly user: number;
  readonly system: number;
}

/** The child's process.memoryUsage() in bytes, after a full GC when the child runs with --expose-gc. */
export interface MemoryReading {
  readonly rss: number;
  readonly heapTotal: number;
  readonly heapUsed: number;
  readonly external: number;
  readonly arrayBuffers: number;
  /** Whether a full GC ran first (the child was started with --expose-gc). */
  readonly collected: boolean;
}

type Handlers = Partial<Record<Exclude<RequestType, 'stop' | 'cpu'>, (arg?: unknown) => Promise<unknown>>>;

function send(message: ChildMessage): void {
  process.send?.(message);
}

/** Child side: reports a start-up failure to the parent and exits. */
export function reportFailure(error: unknown): never {
  send({ type: 'failed', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
}

/**
 * Child side: announces readiness and serves the parent's requests. `close` runs once, on the
 * parent's `stop`, on SIGTERM, or when the IPC channel drops because the parent died — so a
 * child never outlives the bench.
 */
export function serveParent(ready: Omit<ReadyMessage, 'type'>, close: () => Promise<void>, handlers: Handlers = {}) {
  let closing: Promise<void> | null = null;
  const shutdown = () => {
    closing ??= close()
      .catch(() => undefined)
      .finally(() => process.exit(0));
    return closing;
  };

  process.on('message', (raw: RequestMessage) => {
    void (async () => {
      try {
        if (raw.type === 'stop') {
          // Reply first: after close() the process exits and the channel is gone.
          send({ id: raw.id, ok: true, value: null });
          await shutdown();
          return;
        }
        const value: unknown = raw.type === 'cpu' ? process.cpuUsage() : await handlers[raw.type]?.(raw.arg);
        send({ id: raw.id, ok: true, value: value ?? null });
      } catch (error) {
        send({ id: raw.id, ok: false, error: error instanceof Error ? error.message : String(error) });
      }
    })();
  });
  process.on('disconnect', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
  // Ctrl-C reaches the whole process group; the parent decides when the children stop.
  process.on('SIGINT', () => undefined);
  send({ type: 'ready', ...ready });
}

/**
 * Child side, for a server child: listens on a free loopback port, then announces that URL (serveParent). On `stop`
 * its connections are closed and it stops listening before `close` releases the rest (a pool).
 */
export async function serveHttpToParent(
  server: Server,
  close: () => Promise<void>,
  handlers: Handlers = {},
): Promise<void> {
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  serveParent(
    { url: `http://127.0.0.1:${port}` },
    async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await close();
    },
    handlers,
  );
}
