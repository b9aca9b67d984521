import { ApolloServer } from '@apollo/server';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import { ApolloServerPluginLandingPageLocalDefault } from '@apollo/server/plugin/landingPage/default';
import express, { type Request, type Response } from 'express';
import type { GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { Authentication } from '../../auth/credentials.js';
import type { Config } from '../../config/index.js';
import { createContext, type Context } from '../../context.js';
import type { Services } from '../../domain/services.js';
import {
  authenticate,
  graphqlAuthFailure,
  refuseCookieCsrf,
  refuseForeignOrigins,
  refuseSimpleTextGets,
} from '../middleware/index.js';
import type { Metrics } from '../observability/index.js';
import { createJitExecutor, type Pipeline } from '../pipeline/index.js';
import { apolloMiddleware } from './apolloMount.js';
import { graphqlEnvelope, isLandingPageRequest } from './envelope.js';
import type { Step } from './frontDoor.js';
import { withGraphiqlLink } from './graphiql.js';
import { persistedDocuments } from './persistedDocuments.js';
import { protocolPlugin, tracingPlugin } from './plugin.js';
import type { ResultCache } from './resultCache/index.js';
import { tracing } from '../../tracing.js';

/** The envelope's parse says whether a request sends its document as text rather than naming a persisted one. */
const sendsText = (_req: Request, res: Response) => {
  const { query } = res.locals.graphqlParams;
  return typeof query === 'string' && query !== '';
};

/**
 * GraphQL over HTTP at /graphql: the envelope, cookie CSRF, the caller, persisted documents and the result cache in
 * front of Apollo, which runs with the pipeline's rules and this API's plugin.
 */
export async function createGraphqlRouter(deps: {
  schema: GraphQLSchema;
  config: Config;
  services: Services;
  /** Access tokens, and browser sessions whose cookie authenticates /graphql too. */
  auth: Authentication;
  metrics: Metrics;
  logger: Logger;
  pipeline: Pipeline;
  /** Origins a cookie-bearing request may come from. */
  trustedOrigins: ReadonlySet<string>;
  /** RESULT_CACHE=on: stored query responses, answered before Apollo. */
  resultCache?: ResultCache;
}): Promise<{ steps: Step[]; router: express.Router; stop(): Promise<void> }> {
  const { config, services, auth, metrics, logger, pipeline, resultCache } = deps;
  const { session } = auth;
  // Checks the document's source once, prepares its record and hands it to Apollo by hash (persistedDocuments.ts).
  const documents = persistedDocuments(pipeline);
  // Queries and mutations run as their records' compiled code, once Apollo has admitted them.
  const jit = createJitExecutor(deps.schema, { records: pipeline.records });
  const apollo = new ApolloServer<Context>({
    gateway: jit.gateway,
    // The pipeline's rules refuse introspection in production, on every transport alike.
    introspection: true,
    includeStacktraceInErrorResponses: false,
    // server.ts owns shutdown: Apollo must keep serving while in-flight requests drain.
    stopOnTerminationSignals: false,
    // Apollo's rule, applied where it matters: refuseCookieCsrf for the session cookie, refuseSimpleTextGets for
    // query texts sent by GET in production (persisted documents stay plain GETs).
    csrfPrevention: false,
    // Apollo pretty-prints by default; compact JSON is smaller and faster.
    stringifyResult: resultCache ? (value) => resultCache.stringify(value) : (value) => JSON.stringify(value),
    parseOptions: pipeline.parseOptions,
    validationRules: pipeline.rules,
    formatError: pipeline.formatError,
    logger: {
      debug: (m) => logger.debug(m),
      info: (m) => logger.info(m),
      warn: (m) => logger.warn(m),
      error: (m) => logger.error(m),
    },
    // Persisted queries are content-addressed; a day's TTL and the pipeline's bounds keep the store small. Both
    // stores read the prepared records (bounded by size, the source counted), so Apollo neither hashes nor parses.
    persistedQueries: { ttl: 86_400, cache: documents.cache },
    documentStore: documents.documentStore,
    plugins: [
      protocolPlugin({ schema: deps.schema, metrics, pipeline, jit, resultCache }),
      ...(tracing.enabled ? [tracingPlugin()] : []),
      // Its per-field hooks cost more than the execution they watch; the policy comes from the document instead.
      ApolloServerPluginCacheControlDisabled(),
      // Apollo adds it unasked, and calls its requestDidStart on every request only for it to find nothing to do.
      ApolloServerPluginInlineTraceDisabled(),
      config.isProduction
        ? ApolloServerPluginLandingPageDisabled()
        : withGraphiqlLink(ApolloServerPluginLandingPageLocalDefault({ embed: true, includeCookies: true })),
    ],
  });
  await apollo.start();

  const contextOf = (req: Request, res: Response): Context =>
    (res.locals.graphqlContext as Context | undefined) ??
    pipeline.identify(
      createContext(services, res.locals.principal, String(req.id), () => req.log),
      req.ip,
    );
  const withRecord = (context: Context, res: Response): Context => {
    const record = res.locals.graphqlRecord;
    if (record) context.prepared = record;
    return context;
  };
  // The path of a request to /graphql, step by step (the app's front door runs them after its own, frontDoor.ts).
  const steps: Step[] = [
    // Without browser sessions no cookie authenticates anything, so there is nothing to forge.
    ...(session ? [refuseCookieCsrf(session.cookieName, isLandingPageRequest)] : []),
    refuseForeignOrigins(deps.trustedOrigins),
    // Method, media types, the body and the parameters, parsed once into res.locals.graphqlParams.
    ...graphqlEnvelope({ bodyLimit: '100kb', landingPage: !config.isProduction }),
    ...(config.isProduction ? [refuseSimpleTextGets(sendsText)] : []),
    authenticate(auth, graphqlAuthFailure),
    documents.middleware,
    ...(resultCache ? [resultCache.middleware(contextOf)] : []),
    apolloMiddleware(apollo, async ({ req, res }) => withRecord(contextOf(req, res), res), documents.handOff),
  ];
  // Other paths under /graphql (a trailing slash, another case) take the same steps through Express's router.
  const router = express.Router().use('/', ...steps);
  return { steps, router, stop: () => apollo.stop() };
}
