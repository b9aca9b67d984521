/**
 * Child process: a peer. GraphQL Yoga (its defaults: graphql-js execution, masked errors) on `node:http`, serving
 * bench/peers/shared.ts's schema from the same PostgreSQL with the same SQL and DataLoader batching. No auth.
 *
 * graphql-yoga's type declarations pull in the DOM library (its fetch-API types), which would change the global
 * `ReadableStream` and `Headers` types for the whole project's typecheck, so it is imported by a name TypeScript does
 * not resolve, with the little of its API used here typed below.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { reportFailure, serveHttpToParent } from '../ipc.js';
import { createPeerData, type PeerContext, typeDefs } from './shared.js';

type RequestListener = (req: IncomingMessage, res: ServerResponse) => unknown;
interface YogaModule {
  createSchema(opts: { typeDefs: string; resolvers: unknown }): unknown;
  createYoga(opts: {
    schema: unknown;
    context: () => PeerContext;
    graphiql: boolean;
    logging: boolean;
    landingPage: boolean;
  }): RequestListener;
}
const YOGA: string = 'graphql-yoga';

try {
  const { createSchema, createYoga } = (await import(YOGA)) as YogaModule;
  const data = createPeerData();
  const yoga = createYoga({
    schema: createSchema({ typeDefs, resolvers: data.resolvers }),
    context: () => data.context(),
    graphiql: false,
    logging: false,
    landingPage: false,
  });
  const server = createServer((req, res) => {
    if (req.url === '/metrics') {
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' }).end(data.metricsText());
      return;
    }
    data.countRequest();
    void yoga(req, res);
  });
  await serveHttpToParent(server, () => data.close());
} catch (error) {
  reportFailure(error);
}
