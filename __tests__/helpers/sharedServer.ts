import { afterAll } from '@jest/globals';
import { startReplicas, startTestServer, stopReplicas, type TestServer } from './server.js';

/**
 * One default test server (`startTestServer()`, no settings) for the describe blocks of a file that need nothing
 * else: each start costs about 0.7 s of CPU (mostly the embedded database loading its template) and each demo user's
 * sign-in 0.1 s more, so blocks that once were files of their own and each started the same server now share one.
 * Only for blocks that own their data (orders of their own, fresh subjects) and assert nothing about the server's
 * state as a whole (counts of everything, metrics, budgets, locks); a block that does starts its own.
 *
 * Call it at the top level of a file; the function it returns starts the server on its first call, and the file's
 * last `afterAll` closes it. `replicated`: a block starts a second server over its database (see startTestServer).
 */
export function sharedTestServer(opts: { replicated?: boolean } = {}): () => Promise<TestServer> {
  let server: Promise<TestServer> | undefined;
  afterAll(async () => {
    if (server) await (await server).close();
  });
  return () => (server ??= startTestServer({}, opts));
}

/**
 * One default replica pair (`startReplicas()`, no settings), on sharedTestServer's terms, for the `blocks` describe
 * blocks of a file that use it: each calls `start()` in its beforeAll and `release()` in its afterAll. Replicas poll
 * the event outbox every 200 ms (about 37 ms of CPU a second each, idle), so the pair closes as soon as the last of
 * them is done rather than at the file's end; the file's last `afterAll` closes it if some never ran (`-t`).
 */
export function sharedReplicas(blocks: number): {
  start(): Promise<{ a: TestServer; b: TestServer }>;
  release(): Promise<void>;
} {
  let replicas: Promise<{ a: TestServer; b: TestServer }> | undefined;
  let released = 0;
  const stop = async () => {
    const started = replicas;
    replicas = undefined;
    if (started) await stopReplicas(await started);
  };
  afterAll(stop);
  return {
    start: () => (replicas ??= startReplicas()),
    release: async () => {
      if (++released === blocks) await stop();
    },
  };
}
