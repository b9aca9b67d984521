import type { KeyValueCache } from '@apollo/utils.keyvaluecache';
import {
  GraphQLError,
  specifiedRules,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLFormattedError,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ParseOptions,
  type ValidationRule,
} from 'graphql';
import type { Redis } from 'ioredis';
import type { Config } from '../../config/index.js';
import type { Context } from '../../context.js';
import { clientKey, type Charge, type RateBudget } from '../middleware/index.js';
import type { Metrics, Tally } from '../observability/index.js';
import { clientError, formatError, formatResult, type ErrorPolicy } from '../problems/index.js';
import { tracing } from '../../tracing.js';
import { costOf } from './cost.js';
import { createDeprecationMetric, deprecatedUses } from './deprecations.js';
import { noIntrospection } from './introspection.js';
import { directiveRulesOf } from './limits.js';
import { nameOperation } from './operationSpans.js';
import { boundedApqStore, loadManifest, sha256 } from './persistedDocuments.js';
import { createPreparedDocuments, isRefusal, operationIn, type PreparedDocument, type Refusal } from './prepared.js';
import { isRecord, namedHash, type OperationParams } from './requestParams.js';

/** Apollo prefixes its persisted-query keys so; the streaming transports read the same entries. */
const APQ_PREFIX = 'apq:';

/** The client address a context was identified with (see identify). */
const CLIENT_ADDRESS = Symbol('clientAddress');
const clientAddress = (context: Context) => (context as Context & { [CLIENT_ADDRESS]?: string })[CLIENT_ADDRESS];

/**
 * Sent as `extensions.cost`: the operation's complexity (objects it may return), the points it spent
 * from the client's budget, and what the budget has left until it resets.
 */
export interface CostReport {
  readonly complexity: number;
  readonly requested: number;
  readonly remaining: number;
  readonly resetSeconds: number;
}

/**
 * The budget is counted in GitHub's points: one per hundred objects an operation may return, at
 * least one. So 5,000 points an hour is 5,000 small requests, or 50 that each read 10,000 objects.
 */
export const pointsFor = (complexity: number) => Math.max(1, Math.ceil(complexity / 100));

export type Admission =
  | { readonly ok: true; readonly charge: Charge; readonly cost: CostReport }
  | { readonly ok: false; readonly error: GraphQLError; readonly charge?: Charge };

/**
 * The one GraphQL pipeline: HTTP (Apollo), graphql-ws and graphql-sse all take their parse options,
 * validation rules, limits, cost and rate budget, persisted documents, error formatting, masking and
 * introspection policy from here, so a transport cannot forget a rule or format an error its own way.
 */
export function createPipeline(deps: {
  schema: GraphQLSchema;
  config: Config;
  budget: RateBudget;
  metrics: Metrics;
  redis?: Redis;
}) {
  const { schema, config, budget, metrics } = deps;
  const limits = config.graphql;
  const manifest = limits.persistedDocuments ? loadManifest(limits.persistedDocuments) : undefined;
  const trustedOnly = Boolean(manifest) && config.isProduction;
  // One deployment per database schema: replicas share the store, and test runs on one Redis do not.
  const schemaName = config.database.kind === 'postgres' ? config.database.schema : undefined;
  const apq = boundedApqStore(limits.apq, deps.redis, `orders-api:apq:${schemaName ? `${schemaName}:` : ''}`);
  const policy: ErrorPolicy = { hideSuggestions: config.isProduction };
  const parseOptions: ParseOptions = { maxTokens: limits.maxTokens };
  const directives = directiveRulesOf(schema);
  /** Apollo's rules beside graphql's specified ones, for a document it validates itself (one that failed here). */
  const rules: ValidationRule[] = config.isProduction ? [noIntrospection] : [];
  /**
   * Every document is parsed, held to the static limits and validated in one place, once: its prepared record
   * (prepared.ts), which the manifest's documents have from the start.
   */
  const records = createPreparedDocuments({
    schema,
    parseOptions,
    limits,
    directives,
    rules: [...specifiedRules, ...rules],
    registry: metrics.registry,
  });
  if (manifest) records.prewarm(manifest);
  /** A document's record, built now if it has none; a document over the static limits is counted as refused. */
  function prepareDocument(source: string, hash: string): PreparedDocument | Refusal {
    const prepared = records.prepare(source, hash);
    if (isRefusal(prepared) && prepared.stage === 'limits') metrics.refusals.inc({ reason: 'query_limits' });
    return prepared;
  }
  const deprecations = createDeprecationMetric(metrics.registry);
  /** One bound counter per operation type, so counting an operation allocates nothing. */
  const operationCounters = new Map<string, Tally>();
  const operationCounter = (type: string) => {
    let counter = operationCounters.get(type);
    if (!counter) operationCounters.set(type, (counter = metrics.graphqlOperations.tally(type)));
    return counter;
  };
  const costs = new WeakMap<object, CostReport>();

  /**
   * Persisted documents. With a manifest, hashes resolve to its documents only and nothing is
   * registered (trusted documents); otherwise automatic persisted queries, bounded in size and count.
   */
  const documents: KeyValueCache<string> = {
    get: async (key) => (manifest ? manifest.get(key.slice(APQ_PREFIX.length)) : apq.get(key)),
    set: async (key, value, options) => (manifest ? undefined : apq.set(key, value, options)),
    delete: async (key) => (manifest ? false : apq.delete(key)),
  };

  /**
   * Checks a request's document reference; a full text is returned as it is for the transport to run. `actual` is
   * the text's sha256, when the caller has it already.
   */
  function checkSource(params: OperationParams, actual?: string): GraphQLError | undefined {
    const persisted = isRecord(params.extensions) ? params.extensions.persistedQuery : undefined;
    if (isRecord(persisted) && persisted.version !== 1)
      return clientError('Only version 1 of persisted queries is supported.', 'BAD_REQUEST');
    const hash = namedHash(params);
    if (typeof params.query !== 'string' || params.query === '') return undefined;
    actual ??= sha256(params.query);
    if (hash !== undefined && hash !== actual)
      return clientError('The sha256Hash does not match the query text.', 'PERSISTED_QUERY_HASH_MISMATCH');
    if (trustedOnly && !manifest!.has(actual))
      return clientError(
        'Only trusted documents run here: send a known extensions.persistedQuery.sha256Hash or documentId.',
        'PERSISTED_QUERY_NOT_TRUSTED',
      );
    return undefined;
  }

  async function resolveSource(params: OperationParams): Promise<string | GraphQLError> {
    const problem = checkSource(params);
    if (problem) return problem;
    if (typeof params.query === 'string' && params.query !== '') return params.query;
    const hash = namedHash(params);
    if (hash === undefined) return clientError('The query parameter is required.', 'BAD_REQUEST');
    return (
      (await documents.get(APQ_PREFIX + hash)) ?? clientError('PersistedQueryNotFound', 'PERSISTED_QUERY_NOT_FOUND')
    );
  }

  /** Cost analysis and the rate budget, once the operation is known and before anything runs. */
  async function admit(
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: unknown,
    context: Context,
    /** The document's prepared record: its deprecations and the operation's fixed cost are known there. */
    record?: PreparedDocument,
  ): Promise<Admission> {
    const prepared = record?.document === document ? record.operations.get(operation) : undefined;
    deprecations.record(prepared ? record!.deprecations : deprecatedUses(schema, document), context.principal);
    const complexity = prepared?.cost ?? costOf(schema, document, operation, isRecord(variables) ? variables : {}).cost;
    // A subscription is charged once but executed for every event it receives, for as long as it stays open.
    const perEvent = operation.operation === 'subscription';
    const maximum = perEvent ? limits.maxSubscriptionCost : limits.maxCost;
    if (complexity > maximum) {
      metrics.refusals.inc({ reason: 'query_cost' });
      const asks = perEvent
        ? `subscription could send ${complexity} objects per event`
        : `operation could return ${complexity} objects`;
      return {
        ok: false,
        error: clientError(`The ${asks}; at most ${maximum} are allowed. Ask for smaller pages.`, 'QUERY_TOO_COMPLEX', {
          cost: { complexity, maximum },
        }),
      };
    }
    const requested = pointsFor(complexity);
    const charge = await budget.charge(clientKey(context.principal, clientAddress(context)), requested);
    const report = { complexity, requested, remaining: charge.remaining, resetSeconds: charge.resetSeconds };
    costs.set(context, report);
    if (charge.allowed) {
      operationCounter(operation.operation).inc();
      return { ok: true, charge, cost: report };
    }
    return {
      ok: false,
      charge,
      error: clientError(
        `The rate budget of ${charge.limit} points per ${charge.windowSeconds} s is spent; it resets in ${charge.resetSeconds} s.`,
        'RATE_LIMITED',
        { cost: report },
      ),
    };
  }

  return {
    parseOptions,
    rules,
    policy,
    documents,
    records,
    prepareDocument,
    checkSource,
    admit,
    formatError: (formatted: GraphQLFormattedError, error: unknown) => formatError(formatted, error, policy),

    /**
     * Remembers whose budget a context's operations spend. Kept on the context itself, so that Apollo's copy of
     * it (the one its hooks are given) still knows the client's address.
     */
    identify<C extends Context>(context: C, ip: string | undefined): C {
      (context as C & { [CLIENT_ADDRESS]?: string })[CLIENT_ADDRESS] = ip;
      return context;
    },

    /** The `extensions.cost` of the operation a context ran, once admitted. */
    costOf: (context: object) => costs.get(context),

    /**
     * Everything before execution for the streaming transports (Apollo does the same steps itself with
     * this pipeline's pieces): the document, parsed and validated, its cost admitted against the budget.
     */
    async prepare(
      params: OperationParams,
      context: Context,
      opts: { method?: string } = {},
    ): Promise<{ ok: true; args: ExecutionArgs } | { ok: false; errors: GraphQLError[] }> {
      const source = await resolveSource(params);
      if (source instanceof GraphQLError) return { ok: false, errors: [source] };
      const hash = sha256(source);
      const record = prepareDocument(source, hash);
      if (isRefusal(record)) return { ok: false, errors: refusalErrors(record) };
      const operationName = typeof params.operationName === 'string' ? params.operationName : undefined;
      const operation = operationIn(record, operationName)?.operation;
      if (!operation) {
        return {
          ok: false,
          errors: [clientError('The operation to run could not be determined.', 'OPERATION_RESOLUTION_FAILURE')],
        };
      }
      if (tracing.recording()) nameOperation(tracing.active(), operation.operation, operation.name?.value, hash);
      const { document } = record;
      if (opts.method === 'GET' && operation.operation === 'mutation')
        return { ok: false, errors: [clientError('Mutations cannot be sent with GET; use POST.', 'BAD_REQUEST')] };
      const admission = await admit(document, operation, params.variables, context, record);
      if (!admission.ok) return { ok: false, errors: [admission.error] };
      return {
        ok: true,
        args: {
          schema,
          document,
          ...(operationName ? { operationName } : {}),
          variableValues: isRecord(params.variables) ? params.variables : undefined,
          contextValue: context,
        },
      };
    },

    /** A result as the streaming transports send it: masked, counted, with its cost. */
    formatResult(result: ExecutionResult, context: Context | undefined, logUnexpected: (error: unknown) => void) {
      for (const error of result.errors ?? [])
        metrics.graphqlErrors.inc({ code: String(formatError(error.toJSON(), error, policy).extensions?.code) });
      const cost = context && costs.get(context);
      return formatResult(result, context, logUnexpected, policy, cost ? { cost } : undefined);
    },

    /** Errors that end an operation before it runs (graphql-ws `error` messages). */
    formatErrors(errors: readonly GraphQLError[]): GraphQLFormattedError[] {
      return errors.map((e) => {
        const formatted = formatError(e.toJSON(), e, policy);
        metrics.graphqlErrors.inc({ code: String(formatted.extensions?.code) });
        return formatted;
      });
    },
  };
}

export type Pipeline = ReturnType<typeof createPipeline>;

/** A refused document's errors as the streaming transports send them. */
function refusalErrors({ stage, errors }: Refusal): GraphQLError[] {
  if (stage === 'parse') return [clientError(errors[0]!.message, 'GRAPHQL_PARSE_FAILED')];
  if (stage === 'limits') return [...errors];
  return errors.map((e) => clientError(e.message, 'GRAPHQL_VALIDATION_FAILED', {}, e.nodes ? { nodes: e.nodes } : {}));
}
