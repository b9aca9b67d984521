import { HeaderMap, type ApolloServerPlugin, type GraphQLRequestListener } from '@apollo/server';
import { unwrapResolverError } from '@apollo/server/errors';
import { GraphQLError, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';
import type { Context } from '../../context.js';
import { rateLimitHeaders } from '../middleware/index.js';
import type { Metrics } from '../observability/index.js';
import {
  cacheControlHeader,
  derivePolicy,
  nameOperation,
  policyIfCacheable,
  type CachePolicy,
  type createJitExecutor,
  type Pipeline,
  type PreparedOperation,
} from '../pipeline/index.js';
import {
  codeOf,
  isUnavailable,
  isUnexpected,
  mediaTypeFor,
  PROBLEM_TYPES,
  requestErrorStatus,
  RETRY_LATER,
  UNAVAILABLE_STATUS,
} from '../problems/index.js';
import type { ResultCache } from './resultCache/index.js';
import { tracing } from '../../tracing.js';

/** The prepared operation Apollo resolved, from the record the front door put on the context (persistedDocuments.ts). */
function preparedOf(
  { prepared }: Context,
  document: unknown,
  operation: OperationDefinitionNode | undefined,
): PreparedOperation | undefined {
  if (!operation || prepared === undefined || prepared.document !== document) return undefined;
  return prepared.operations.get(operation);
}

/**
 * The protocol's hooks into Apollo's request pipeline, all read from the document's prepared record: cost and the rate
 * budget before execution, the cache policy, the compiled graphql-jit run, error logging, and the response's status,
 * headers and `extensions.cost`.
 */
export function protocolPlugin(deps: {
  schema: GraphQLSchema;
  metrics: Metrics;
  pipeline: Pipeline;
  jit: ReturnType<typeof createJitExecutor>;
  resultCache: ResultCache | undefined;
}): ApolloServerPlugin<Context> {
  const { schema, metrics, pipeline, jit, resultCache } = deps;
  // The hooks keep no state of their own, so every request shares one listener.
  const listener: GraphQLRequestListener<Context> = {
    // A document without a record (one that failed to validate there, mostly): counted, for it costs a parse.
    async parsingDidStart() {
      pipeline.records.parsedByApollo();
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
        (await pipeline.admit(document, operation, request.variables, contextValue, contextValue.prepared));
      const headers = admission.charge ? rateLimitHeaders(admission.charge) : {};
      for (const [name, value] of Object.entries(headers)) response.http.headers.set(name.toLowerCase(), value);
      if (admission.ok) {
        const policy = preparedOf(contextValue, document, operation)?.policy;
        overallCachePolicy.restrict(policy ?? derivePolicy(schema, document, operation, request.variables));
        return;
      }
      const status = PROBLEM_TYPES[codeOf(admission.error)].status;
      throw new GraphQLError(admission.error.message, {
        extensions: {
          ...admission.error.extensions,
          http: { status, headers: new HeaderMap(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])) },
        },
      });
    },
    // The compiled operation runs here; Apollo's execution step is left for results with errors (jitExecutor.ts).
    async responseForOperation(requestContext) {
      const compiled = preparedOf(
        requestContext.contextValue,
        requestContext.document,
        requestContext.operation,
      )?.compiled();
      const result = await (tracing.enabled
        ? tracing.inSpan('graphql.execute', {}, () => jit.run(requestContext, compiled))
        : jit.run(requestContext, compiled));
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
      setCacheControl(response, overallCachePolicy, preparedOf(contextValue, document, operation ?? undefined));
      // A shared cache would hand one caller's budget to everyone who gets the stored copy.
      const isPublic = overallCachePolicy.policyIfCacheable()?.scope === 'PUBLIC';
      if (isPublic) {
        response.http.headers.delete('ratelimit');
        response.http.headers.delete('ratelimit-policy');
      }
      if (response.body.kind !== 'single') return;
      // The media type the envelope negotiated already: set in the head, Apollo does not negotiate it again.
      const mediaType = mediaTypeFor(request.http?.headers.get('accept'));
      if (mediaType) response.http.headers.set('content-type', `${mediaType}; charset=utf-8`);
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
      // A dependency that is down: the one answer every transport gives (problems/unavailable.ts), whatever part of
      // the data did resolve.
      if (errors?.some(isUnavailable)) {
        response.http.status = UNAVAILABLE_STATUS;
        response.http.headers.set('retry-after', RETRY_LATER['Retry-After']);
        return;
      }
      // A request error (no `data`): Apollo answers 400 whatever the media type; requestErrorStatus has the rule.
      if (data === undefined && errors?.length && response.http.status !== undefined) {
        response.http.status = requestErrorStatus(mediaType, response.http.status);
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
  /** The operation's record: its header, when the policy is its own. */
  prepared: PreparedOperation | undefined,
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
  const own = !existing && prepared?.policy !== undefined;
  const header =
    own && prepared.policy!.maxAge === policy.maxAge && prepared.policy!.scope === policy.scope
      ? prepared.cacheControl!
      : cacheControlHeader(policy);
  response.http.headers.set('cache-control', cacheable ? header : 'no-store');
}

/**
 * Tracing's hooks, added only when tracing is on (apolloMount.ts has opened the operation span around Apollo's whole
 * run): a span for parsing and one for validating, which Apollo skips for a document it has already, and the
 * operation's name, type and document hash once it is resolved. Nothing per field: execute is one span
 * (protocolPlugin), and resolver spans are OTEL_GRAPHQL_RESOLVER_SPANS's.
 */
export function tracingPlugin(): ApolloServerPlugin<Context> {
  const listener: GraphQLRequestListener<Context> = {
    async parsingDidStart() {
      const span = tracing.start('graphql.parse');
      return async (error) => {
        if (error) tracing.fail(span, 'GRAPHQL_PARSE_FAILED');
        span?.end();
      };
    },
    async validationDidStart() {
      const span = tracing.start('graphql.validate');
      return async (errors) => {
        if (errors?.length) tracing.fail(span, 'GRAPHQL_VALIDATION_FAILED');
        span?.end();
      };
    },
    async didResolveOperation({ operation, operationName, queryHash }) {
      if (operation) nameOperation(tracing.active(), operation.operation, operationName, queryHash);
    },
    async didEncounterErrors({ errors }) {
      if (errors.some(isUnexpected)) tracing.fail(tracing.active(), 'INTERNAL_SERVER_ERROR');
    },
  };
  return { requestDidStart: async () => listener };
}
