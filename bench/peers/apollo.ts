/**
 * Child process: a peer. Apollo Server 5 on Express 5 as its documentation sets it up (`expressMiddleware` of
 * @as-integrations/express5 behind `express.json()`), serving bench/peers/shared.ts's schema from the same PostgreSQL
 * with the same SQL and DataLoader batching. No auth, no limits, no request log: the cost of the stack this app is
 * built on, before any of the app's own work. With BENCH_APOLLO_JIT=1 operations run as graphql-jit compiled code
 * through Apollo's gateway interface (src/http/pipeline/jitExecutor.ts, as the app runs them); otherwise Apollo's
 * default, graphql-js.
 */
import { createServer } from 'node:http';
import { ApolloServer } from '@apollo/server';
import { expressMiddleware } from '@as-integrations/express5';
import { makeExecutableSchema } from '@graphql-tools/schema';
import express from 'express';
import { createJitExecutor } from '../../src/http/pipeline/jitExecutor.js';
import { reportFailure, serveHttpToParent } from '../ipc.js';
import { createPeerData, type PeerContext, typeDefs } from './shared.js';

try {
  const data = createPeerData();
  const schema = makeExecutableSchema({ typeDefs, resolvers: data.resolvers });
  const apollo =
    process.env.BENCH_APOLLO_JIT === '1'
      ? new ApolloServer<PeerContext>({ gateway: createJitExecutor(schema).gateway })
      : new ApolloServer<PeerContext>({ schema });
  await apollo.start();
  const app = express();
  app.get('/metrics', (_req, res) => {
    res.type('text/plain; version=0.0.4').send(data.metricsText());
  });
  app.use(
    '/graphql',
    (_req, _res, next) => {
      data.countRequest();
      next();
    },
    express.json(),
    expressMiddleware(apollo, { context: async () => data.context() }),
  );
  const server = createServer(app);
  await serveHttpToParent(server, async () => {
    await apollo.stop();
    await data.close();
  });
} catch (error) {
  reportFailure(error);
}
