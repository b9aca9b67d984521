import { afterAll } from '@jest/globals';
import { startTestServer, type TestServer } from './server.js';

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
