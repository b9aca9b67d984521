import { ApolloServer, HeaderMap, type ApolloServerPlugin, type GraphQLRequestListener } from '@apollo/server';
import { unwrapResolverError } from '@apollo/server/errors';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import { ApolloServerPluginLandingPageLocalDefault } from '@apollo/server/plugin/landingPage/default';
import { InMemoryLRUCache } from '@apollo/utils.keyvaluecache';
import express, { type NextFunction, type Request, type Response } from 'express';
import { GraphQLError, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { TokenVerifier } from '../../auth/bearer.js';
import type { Config } from '../../config.js';
import { createContext, type Context } from '../../context.js';
import { RETRY_AFTER_SECONDS } from '../../domain/errors.js';
import type { Services } from '../../domain/services.js';
import { apolloMiddleware } from './apolloMount.js';
import { authenticate, type AuthenticateOptions } from '../middleware/authenticate.js';
import { refuseCookieCsrf } from '../middleware/cookieCsrf.js';
import {
  graphqlAuthFailure,
  graphqlEnvelope,
  mediaTypeFor,
  refuseForeignOrigins,
  sendGraphqlError,
} from './envelope.js';
import { cacheControlHeader, createPolicyCache, policyIfCacheable, type CachePolicy } from '../pipeline/cachePolicy.js';
import { withGraphiqlLink } from './graphiql.js';
import { codeOf, isUnexpected } from '../problems/graphqlErrors.js';
import { createJitExecutor } from '../pipeline/jitExecutor.js';
import type { Metrics } from '../observability/metrics.js';
import { sha256 } from '../pipeline/persistedDocuments.js';
import { namedHash, type Pipeline } from '../pipeline/pipeline.js';
import { rateLimitHeaders } from '../middleware/rateBudget.js';
import type { ResultCache } from './resultCache.js';

function protocolPlugin(
  metrics: Metrics,
  pipeline: Pipeline,
  policies: ReturnType<typeof createPolicyCache>,
  jit: ReturnType<typeof createJitExecutor>,
  resultCache: ResultCache | undefined,
): ApolloServerPlugin<Context> {
  // The hooks keep no state of their own, so every request shares one listener.
  const listener: GraphQLRequestListener<Context> = {
    // A document's cache policy is worked out once, when it is first validated, and kept with it.
    async validationDidStart({ document }) {
      return async (errors) => {
        if (!errors?.length) policies.remember(document);
      };
    },
    // Cost and budget, before execution: the operation is known and its variables are at hand.
    async didResolveOperation({ document, operation, request, contextValue, response, overallCachePolicy }) {
      if (!operation) return;
      // Executed over plain HTTP, a subscription's resolvers would run once with no event: an internal error.
      if (operation.operation === 'subscription') {
        throw new GraphQLError(
          'Subscriptions are served over WebSocket (graphql-transport-ws) at /graphql and over server-sent events at /graphql/stream, not over plain HTTP.',
          { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } },
        );
      }
      // A refused charge the result cache's lookup already made is not made twice.
      const admission =
        resultCache?.takeAdmission(contextValue) ??
        (await pipeline.admit(document, operation, request.variables, contextValue));
      const headers = admission.charge ? rateLimitHeaders(admission.charge) : {};
      for (const [name, value] of Object.entries(headers)) response.http.headers.set(name.toLowerCase(), value);
      if (admission.ok) {
        overallCachePolicy.restrict(policies.policyOf(document, operation, request.variables));
        return;
      }
      const status = admission.error.extensions.code === 'RATE_LIMITED' ? 429 : 400;
      throw new GraphQLError(admission.error.message, {
        extensions: {
          ...admission.error.extensions,
          http: { status, headers: new HeaderMap(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])) },
        },
      });
    },
    // The compiled operation runs here; Apollo's execution step is left for results with errors (jitExecutor.ts).
    async responseForOperation(requestContext) {
      const result = await jit.run(requestContext);
      return (
        result && {
          http: { status: undefined, headers: new HeaderMap() },
          body: { kind: 'single', singleResult: result },
        }
      );
    },
    async didEncounterErrors({ errors, contextValue }) {
      for (const error of errors) {
        if (isUnexpected(error)) {
          contextValue.log.error({ err: unwrapResolverError(error), path: error.path }, 'unexpected GraphQL error');
        }
      }
    },
    async willSendResponse({ response, request, contextValue, overallCachePolicy, queryHash, document, operation }) {
      setCacheControl(response, overallCachePolicy);
      // A shared cache would hand one caller's budget to everyone who gets the stored copy.
      const isPublic = overallCachePolicy.policyIfCacheable()?.scope === 'PUBLIC';
      if (isPublic) {
        response.http.headers.delete('ratelimit');
        response.http.headers.delete('ratelimit-policy');
      }
      if (response.body.kind !== 'single') return;
      const { errors, data } = response.body.singleResult;
      const cost = pipeline.costOf(contextValue);
      if (cost) response.body.singleResult.extensions = { ...response.body.singleResult.extensions, cost };
      resultCache?.consider(
        contextValue,
        { queryHash, document, operation: operation ?? undefined, overallPublic: isPublic },
        response,
      );
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
  return { requestDidStart: async () => listener };
}

/**
 * `Cache-Control` as Apollo's cache-control plugin sets it, from the policy the document's hints gave: cacheable
 * only for a single result without errors, `no-store` otherwise. A header already set is only ever tightened.
 */
function setCacheControl(
  response: { http: { headers: Map<string, string> }; body?: { kind: string; singleResult?: { errors?: unknown } } },
  overall: { maxAge?: number | undefined; scope?: CachePolicy['scope'] },
) {
  const existing = response.http.headers.get('cache-control');
  const match = existing ? /^max-age=(\d+), (public|private)$/.exec(existing) : null;
  if (existing && existing !== 'no-store' && !match) return;
  const policy = { maxAge: overall.maxAge, scope: overall.scope };
  if (match) {
    const maxAge = Number(match[1]);
    if (policy.maxAge === undefined || maxAge < policy.maxAge) policy.maxAge = maxAge;
    if (match[2] === 'private') policy.scope = 'PRIVATE';
    else if (policy.scope === undefined) policy.scope = 'PUBLIC';
  }
  const cacheable =
    existing !== 'no-store' &&
    policyIfCacheable(policy) &&
    response.body?.kind === 'single' &&
    !response.body.singleResult?.errors;
  response.http.headers.set('cache-control', cacheable ? cacheControlHeader(policy) : 'no-store');
}

/** A browser opening /graphql gets the Sandbox page: nothing runs, so nothing can be forged (Apollo agrees). */
function isLandingPageRequest(req: Request): boolean {
  return (
    req.method === 'GET' &&
    req.query.query === undefined &&
    req.query.extensions === undefined &&
    req.query.documentId === undefined &&
    req.accepts(['json', 'html']) === 'html'
  );
}

/**
 * Before Apollo: a `documentId` becomes the persisted-query extension Apollo knows; a hash that does not
 * match its text, or an untrusted text in trusted-documents mode, is refused with its own code; a text
 * over the static limits is refused before Apollo's full validation. Apollo then looks hashes up in the
 * pipeline's document store and validates with the pipeline's rules, limits included.
 */
function persistedDocuments(pipeline: Pipeline) {
  // Hashes of texts that passed the static limits lately, so a popular query is not parsed twice per request.
  const screened = new Set<string>();
  const remember = (key: string) => {
    if (screened.size >= 1000) screened.delete(screened.values().next().value!);
    screened.add(key);
  };
  /** A request error as Apollo would send it: 200 for application/json, 400 for graphql-response+json. */
  const sendRequestErrors = (req: Request, res: Response, errors: GraphQLError[]) => {
    const type = mediaTypeFor(req.headers.accept) || 'application/json';
    res.vary('Accept');
    res
      .status(type === 'application/json' ? 200 : 400)
      .type(`${type}; charset=utf-8`)
      .send(JSON.stringify({ errors: pipeline.formatErrors(errors) }));
  };
  return (req: Request, res: Response, next: NextFunction) => {
    const get = req.method === 'GET';
    const q = req.query as Record<string, unknown>;
    const params: Record<string, unknown> = get
      ? { query: q.query, documentId: q.documentId, extensions: parseJson(q.extensions) }
      : (req.body as Record<string, unknown>);
    const problem = pipeline.checkSource(params);
    if (problem) return sendGraphqlError(req, res, problem.message, codeOf(problem));
    const text = typeof params.query === 'string' && params.query !== '' ? params.query : undefined;
    const key = text && sha256(text);
    if (text && key && !screened.has(key)) {
      const { errors } = pipeline.screen(text);
      // Parse errors are left to Apollo, which reports them the same way and as cheaply.
      if (errors?.[0]?.extensions.code === 'GRAPHQL_VALIDATION_FAILED') return sendRequestErrors(req, res, errors);
      if (!errors) remember(key);
    }
    const hash = namedHash(params);
    // Apollo takes an empty query with a hash for a mismatch; without text, the hash alone names the document.
    if (hash !== undefined && (params.query === undefined || params.query === '')) {
      const persistedQuery = { version: 1, sha256Hash: hash };
      if (get) {
        const url = new URL(req.url, 'http://x');
        url.searchParams.delete('documentId');
        url.searchParams.delete('query');
        url.searchParams.set('extensions', JSON.stringify({ ...(params.extensions as object), persistedQuery }));
        req.url = url.pathname + url.search;
      } else {
        const { documentId: _id, query: _query, ...rest } = params;
        req.body = { ...rest, extensions: { ...(rest.extensions as object), persistedQuery } };
      }
    }
    next();
  };
}

function parseJson(value: unknown): unknown {
  if (typeof value !== 'string') return undefined;
  try {
    return JSON.parse(value);
  } catch {
    return undefined;
  }
}

export async function createGraphqlRouter(deps: {
  schema: GraphQLSchema;
  config: Config;
  services: Services;
  verifier: TokenVerifier;
  metrics: Metrics;
  logger: Logger;
  pipeline: Pipeline;
  /** Browser sessions: their cookie authenticates /graphql too. */
  session?: AuthenticateOptions['session'];
  /** Origins a cookie-bearing request may come from. */
  trustedOrigins: ReadonlySet<string>;
  /** RESULT_CACHE=on: stored query responses, answered before Apollo. */
  resultCache?: ResultCache;
}): Promise<{ router: express.Router; stop(): Promise<void> }> {
  const { config, services, verifier, metrics, logger, session, pipeline, resultCache } = deps;
  const policies = createPolicyCache(deps.schema);
  // Queries and mutations run as compiled code; Apollo parses, validates and admits them first, as always.
  const jit = createJitExecutor(deps.schema);
  const apollo = new ApolloServer<Context>({
    gateway: jit.gateway,
    // The pipeline's rules refuse introspection in production, on every transport alike.
    introspection: true,
    includeStacktraceInErrorResponses: false,
    // main.ts owns shutdown: Apollo must keep serving while in-flight requests drain.
    stopOnTerminationSignals: false,
    // Apollo's rule would refuse simple GETs outright; refuseCookieCsrf applies it where it matters.
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
    // Persisted queries are content-addressed; a day's TTL and the pipeline's bounds keep the store small.
    persistedQueries: { ttl: 86_400, cache: pipeline.documents },
    // A parsed document keeps its whole source alive (loc.source) while Apollo's default sizing counts only the
    // AST, so comment-padded documents could fill memory unseen; the source is counted too.
    documentStore: new InMemoryLRUCache<DocumentNode>({
      maxSize: 16 * 2 ** 20,
      sizeCalculation: (doc) => (doc.loc?.source.body.length ?? 0) + InMemoryLRUCache.sizeCalculation(doc),
    }),
    plugins: [
      protocolPlugin(metrics, pipeline, policies, jit, resultCache),
      // Its per-field hooks cost more than the execution they watch; the policy comes from the document instead.
      ApolloServerPluginCacheControlDisabled(),
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
  const router = express.Router();
  router.use(
    '/',
    // Without browser sessions no cookie authenticates anything, so there is nothing to forge.
    ...(session ? [refuseCookieCsrf(session.cookieName, isLandingPageRequest)] : []),
    refuseForeignOrigins(deps.trustedOrigins),
    ...graphqlEnvelope({ bodyLimit: '100kb' }),
    authenticate(verifier, graphqlAuthFailure, session ? { session } : {}),
    persistedDocuments(pipeline),
    ...(resultCache ? [resultCache.middleware(contextOf)] : []),
    apolloMiddleware(apollo, async ({ req, res }) => contextOf(req, res)),
  );
  return { router, stop: () => apollo.stop() };
}
