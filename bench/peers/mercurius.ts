/**
 * Child process: a peer. Mercurius on Fastify with graphql-jit (`jit: 1`: every query compiled on its first run),
 * serving bench/peers/shared.ts's schema from the same PostgreSQL with the same SQL and DataLoader batching. No auth.
 */
import Fastify from 'fastify';
import mercurius from 'mercurius';
import { reportFailure, serveParent } from '../ipc.js';
import { createProfiler } from '../profiler.js';
import { createPeerData, typeDefs } from './shared.js';

try {
  const data = createPeerData();
  const app = Fastify({ logger: false, keepAliveTimeout: 65_000 });
  await app.register(mercurius, {
    schema: typeDefs,
    resolvers: data.resolvers as never,
    jit: 1,
    graphiql: false,
    context: () => data.context(),
  });
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.url.startsWith('/graphql')) data.countRequest();
    done();
  });
  app.get('/metrics', (_request, reply) => reply.type('text/plain; version=0.0.4').send(data.metricsText()));
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  // With --profile, its CPU profile goes beside the app's (bench/README.md shows both).
  const profiler = process.env.BENCH_PROFILE_DIR ? createProfiler(process.env.BENCH_PROFILE_DIR) : null;
  serveParent(
    { url },
    async () => {
      await app.close();
      await data.close();
    },
    profiler ? { 'profile-start': profiler.start, 'profile-stop': profiler.stop } : {},
  );
} catch (error) {
  reportFailure(error);
}
