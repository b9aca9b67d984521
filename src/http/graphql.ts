import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { unwrapResolverError } from '@apollo/server/errors';
import { ApolloServerPluginLandingPageDisabled } from '@apollo/server/plugin/disabled';
import { ApolloServerPluginLandingPageLocalDefault } from '@apollo/server/plugin/landingPage/default';
import type { KeyValueCache } from '@apollo/utils.keyvaluecache';
import { expressMiddleware } from '@as-integrations/express5';
import express, { type Request } from 'express';
import type { GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { TokenVerifier } from '../auth/bearer.js';
import type { Config } from '../config.js';
import { createContext, type Context } from '../context.js';
import { RETRY_AFTER_SECONDS } from '../domain/errors.js';
import type { Services } from '../domain/services.js';
import { authenticate, type AuthenticateOptions } from './authenticate.js';
import { refuseCookieCsrf } from './cookieCsrf.js';
import { depthLimit, MAX_DEPTH } from './depthLimit.js';
import { graphqlAuthFailure, graphqlEnvelope, mediaTypeFor, refuseForeignOrigins } from './graphqlEnvelope.js';
import { formatError, isUnexpected } from './graphqlErrors.js';
import type { Metrics } from './metrics.js';

function protocolPlugin(metrics: Metrics): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async didEncounterErrors({ errors, contextValue }) {
          for (const error of errors) {
            if (isUnexpected(error)) {
              contextValue.log.error({ err: unwrapResolverError(error), path: error.path }, 'unexpected GraphQL error');
            }
          }
        },
        async willSendResponse({ response, request }) {
          if (response.body.kind !== 'single') return;
          const { errors, data } = response.body.singleResult;
          for (const error of errors ?? [])
            metrics.graphqlErrors.inc({ code: String(error.extensions?.code ?? 'UNKNOWN') });
          // A dependency that is down is the server's condition, not the request's: 503 + Retry-After tell
          // clients and balancers to try again (elsewhere), whatever part of the data did resolve.
          if (errors?.some((e) => e.extensions?.code === 'SERVICE_UNAVAILABLE')) {
            response.http.status = 503;
            response.http.headers.set('retry-after', String(RETRY_AFTER_SECONDS));
            return;
          }
          // A request error (no `data`) is 200 for application/json, as the GraphQL-over-HTTP spec says;
          // Apollo answers 400 regardless. Other statuses (405 for a GET mutation) stay as they are.
          if (data === undefined && errors?.length && (response.http.status ?? 200) === 400) {
            if (mediaTypeFor(request.http?.headers.get('accept')) === 'application/json') response.http.status = 200;
          }
        },
      };
    },
  };
}

/** A browser opening /graphql gets the Sandbox page: nothing runs, so nothing can be forged (Apollo agrees). */
function isLandingPageRequest(req: Request): boolean {
  return (
    req.method === 'GET' &&
    req.query.query === undefined &&
    req.query.extensions === undefined &&
    req.accepts(['json', 'html']) === 'html'
  );
}

export async function createGraphqlRouter(deps: {
  schema: GraphQLSchema;
  config: Config;
  services: Services;
  verifier: TokenVerifier;
  metrics: Metrics;
  logger: Logger;
  cache?: KeyValueCache<string>;
  /** Browser sessions: their cookie authenticates /graphql too. */
  session?: AuthenticateOptions['session'];
  /** Origins a cookie-bearing request may come from. */
  trustedOrigins: ReadonlySet<string>;
}): Promise<{ router: express.Router; stop(): Promise<void> }> {
  const { config, services, verifier, metrics, logger, session } = deps;
  const apollo = new ApolloServer<Context>({
    schema: deps.schema,
    introspection: !config.isProduction,
    hideSchemaDetailsFromClientErrors: config.isProduction,
    includeStacktraceInErrorResponses: false,
    // main.ts owns shutdown: Apollo must keep serving while in-flight requests drain.
    stopOnTerminationSignals: false,
    // Apollo's rule would refuse simple GETs outright; refuseCookieCsrf applies it where it matters.
    csrfPrevention: false,
    // Apollo pretty-prints by default; compact JSON is smaller and faster.
    stringifyResult: (value) => JSON.stringify(value),
    validationRules: [depthLimit(MAX_DEPTH)],
    formatError,
    logger: {
      debug: (m) => logger.debug(m),
      info: (m) => logger.info(m),
      warn: (m) => logger.warn(m),
      error: (m) => logger.error(m),
    },
    ...(deps.cache ? { cache: deps.cache } : {}),
    // Persisted queries are content-addressed; a day's TTL keeps the shared cache bounded.
    persistedQueries: { ttl: 86_400 },
    plugins: [
      protocolPlugin(metrics),
      config.isProduction
        ? ApolloServerPluginLandingPageDisabled()
        : ApolloServerPluginLandingPageLocalDefault({ embed: true, includeCookies: true }),
    ],
  });
  await apollo.start();

  const router = express.Router();
  router.use(
    '/',
    // Without browser sessions no cookie authenticates anything, so there is nothing to forge.
    ...(session ? [refuseCookieCsrf(session.cookieName, isLandingPageRequest)] : []),
    refuseForeignOrigins(deps.trustedOrigins),
    ...graphqlEnvelope({ bodyLimit: '100kb' }),
    authenticate(verifier, graphqlAuthFailure, session ? { session } : {}),
    expressMiddleware(apollo, {
      context: async ({ req, res }) => createContext(services, res.locals.principal, String(req.id), req.log),
    }),
  );
  return { router, stop: () => apollo.stop() };
}
