/**
 * Child process: the peer "apollo-minimal". Apollo Server 5 on Express 5 with this app's request path and none of its
 * features: one front-door layer for /graphql (src/http/graphql/frontDoor.ts), the JSON body, the document's hash
 * worked out once and Apollo reached by hash alone (as src/http/graphql/persistedDocuments.ts hands it over), the
 * compiled query run from one plugin listener, the content type set in the head, the answer written once
 * (src/http/graphql/apolloMount.ts), requests and responses born with the app's prototypes
 * (src/http/connections/expressPrototypes.ts); no authentication, limits, cost, budget, masking or request log. It measures what
 * the stack itself costs on the path the app takes, so the app's distance from it is its own features.
 */
import { createServer } from 'node:http';
import { ApolloServer, HeaderMap, type GraphQLRequestListener } from '@apollo/server';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import { makeExecutableSchema } from '@graphql-tools/schema';
import express, { type NextFunction, type Request, type Response } from 'express';
import { expressPrototypes } from '../../src/http/connections/expressPrototypes.js';
import { apolloMiddleware } from '../../src/http/graphql/apolloMount.js';
import { frontDoor } from '../../src/http/graphql/frontDoor.js';
import { createJitExecutor } from '../../src/http/pipeline/jitExecutor.js';
import { sha256 } from '../../src/http/pipeline/persistedDocuments.js';
import { reportFailure, serveHttpToParent } from '../ipc.js';
import { createProfiler } from '../profiler.js';
import { createPeerData, type PeerContext, typeDefs } from './shared.js';

try {
  const data = createPeerData();
  const schema = makeExecutableSchema({ typeDefs, resolvers: data.resolvers });
  const jit = createJitExecutor(schema);
  // The texts the bench sends, by hash: a handful of documents.
  const texts = new Map<string, string>();
  const listener: GraphQLRequestListener<PeerContext> = {
    async responseForOperation(requestContext) {
      const result = await jit.run(requestContext);
      return (
        result && {
          http: { status: undefined, headers: new HeaderMap() },
          body: { kind: 'single', singleResult: result },
        }
      );
    },
    async willSendResponse({ response }) {
      response.http.headers.set('content-type', 'application/json; charset=utf-8');
    },
  };
  const apollo = new ApolloServer<PeerContext>({
    gateway: jit.gateway,
    stringifyResult: (value) => JSON.stringify(value),
    persistedQueries: {
      cache: {
        get: async (key) => texts.get(key.slice('apq:'.length)),
        set: async () => {},
        delete: async () => false,
      },
    },
    plugins: [
      { requestDidStart: async () => listener },
      ApolloServerPluginCacheControlDisabled(),
      ApolloServerPluginInlineTraceDisabled(),
      ApolloServerPluginLandingPageDisabled(),
    ],
  });
  await apollo.start();
  const handOff = (req: Request, _res: Response, search: string) => {
    const { query, ...rest } = req.body as { query: string; extensions?: Record<string, unknown> };
    const hash = sha256(query);
    texts.set(hash, query);
    return {
      body: { ...rest, extensions: { ...rest.extensions, persistedQuery: { version: 1, sha256Hash: hash } } },
      search,
    };
  };
  const app = express();
  app.set('etag', false);
  app.use(
    frontDoor(
      '/graphql',
      [
        (_req: Request, _res: Response, next: NextFunction) => {
          data.countRequest();
          next();
        },
        express.json(),
        apolloMiddleware(apollo, async () => data.context(), handOff),
      ],
      (_req, res) => res.status(404).end(),
    ),
  );
  app.get('/metrics', (_req, res) => {
    res.type('text/plain; version=0.0.4').send(data.metricsText());
  });
  // Requests and responses born with the app's prototypes, as src/server.ts makes them, so that Express's
  // per-request Object.setPrototypeOf changes nothing here either.
  const born = expressPrototypes();
  born.adopt(app);
  const server = createServer({ IncomingMessage: born.IncomingMessage, ServerResponse: born.ServerResponse }, app);
  // With --profile, its CPU profile goes beside the app's: what the app does beyond the stack, function by function.
  const profiler = process.env.BENCH_PROFILE_DIR ? createProfiler(process.env.BENCH_PROFILE_DIR) : null;
  await serveHttpToParent(
    server,
    async () => {
      await apollo.stop();
      await data.close();
    },
    profiler ? { 'profile-start': profiler.start, 'profile-stop': profiler.stop } : {},
  );
} catch (error) {
  reportFailure(error);
}
