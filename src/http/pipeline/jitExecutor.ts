import type { ApolloServerOptions, BaseContext } from '@apollo/server';
import {
  getOperationAST,
  GraphQLError,
  getVariableValues,
  type DocumentNode,
  type ExecutionResult,
  type GraphQLSchema,
} from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { LRUCache } from 'lru-cache';
import { operationIn, type PreparedDocuments } from './prepared.js';

type Gateway = NonNullable<ApolloServerOptions<BaseContext>['gateway']>;
type Executor = NonNullable<Awaited<ReturnType<Gateway['load']>>['executor']>;

/** What one compiled operation costs to keep: its generated code and the document it closes over. */
const sizeOf = (compiled: CompiledQuery, document: DocumentNode) =>
  2 * (compiled.query.toString().length + (document.loc?.source.body.length ?? 0)) + 1024;

/**
 * graphql-jit builds its errors without `extensions`, which Apollo and graphql-js's toJSON() expect; graphql-js
 * gives a located error its original error's extensions, or none.
 */
function asGraphqlJsError(error: GraphQLError): GraphQLError {
  if (error.extensions) return error;
  const located = new GraphQLError(error.message, {
    ...(error.nodes ? { nodes: error.nodes } : {}),
    ...(error.source ? { source: error.source } : {}),
    ...(error.positions ? { positions: error.positions } : {}),
    ...(error.path ? { path: error.path } : {}),
    ...(error.originalError ? { originalError: error.originalError } : {}),
  });
  // graphql-jit records where the field was asked for as `locations` only (no nodes to compute them from).
  if (!located.locations && error.locations) (located as { locations?: unknown }).locations = error.locations;
  return located;
}

export interface JitOptions {
  /** Bytes of compiled operations kept; least recently used go first. */
  readonly maxBytes?: number;
  /** Compiled operations kept. */
  readonly maxEntries?: number;
  /** The prepared records (prepared.ts): an operation that has one runs its compiled query, and nothing is kept here. */
  readonly records?: PreparedDocuments;
}

/**
 * Queries and mutations run as graphql-jit compiled code instead of graphql-js's interpreter, through Apollo's
 * gateway interface (the one way Apollo Server 5 lets another executor run an operation it has parsed,
 * validated and admitted). One compiled function per document and operation: its prepared record's, else kept here,
 * keyed like Apollo's document store (the document's sha256) and bounded by count and bytes. Results are shaped as graphql-js shapes
 * them (`errors` before `data`), and resolver errors keep their original error for masking.
 */
export function createJitExecutor(schema: GraphQLSchema, options: JitOptions = {}) {
  const compiled = new LRUCache<string, { query: CompiledQuery; size: number }>({
    max: options.maxEntries ?? 1000,
    maxSize: options.maxBytes ?? 32 * 2 ** 20,
    sizeCalculation: (entry) => entry.size,
  });

  function compiledFor(
    hash: string,
    document: DocumentNode,
    operationName: string | undefined,
  ): CompiledQuery | ExecutionResult {
    const record = options.records?.get(hash);
    const prepared = record?.document === document ? operationIn(record, operationName) : undefined;
    const ready = prepared?.compiled();
    if (ready) return ready;
    const key = operationName === undefined ? hash : `${hash}\u0000${operationName}`;
    const hit = compiled.get(key);
    if (hit) return hit.query;
    // graphql-jit runs a document's only operation whatever name was asked for; graphql-js refuses an unknown name,
    // and Apollo counts on that refusal (with no error it answers 500).
    if (operationName !== undefined && !getOperationAST(document, operationName)) {
      return { errors: [new GraphQLError(`Unknown operation named "${operationName}".`)] };
    }
    const result = compileQuery(schema, document, operationName);
    if (!isCompiledQuery(result)) return result;
    compiled.set(key, { query: result, size: sizeOf(result, document) });
    return result;
  }

  /** Runs one operation Apollo has resolved; the shape of graphql-js's execute(). */
  async function execute(
    hash: string,
    document: DocumentNode,
    operationName: string | undefined,
    variables: Record<string, unknown> | undefined,
    context: unknown,
  ): Promise<ExecutionResult> {
    return runCompiled(compiledFor(hash, document, operationName), document, operationName, variables, context);
  }

  /** Runs a compiled query (or reports the errors compiling it gave). */
  async function runCompiled(
    query: CompiledQuery | ExecutionResult,
    document: DocumentNode,
    operationName: string | undefined,
    variables: Record<string, unknown> | undefined,
    context: unknown,
  ): Promise<ExecutionResult> {
    // eslint-disable-next-line no-restricted-syntax -- graphql-jit's compiled query method, not SQL
    const result = isCompiledQuery(query) ? await query.query(undefined, context, variables ?? {}) : query;
    if (!result.errors?.length) return { data: result.data };
    // Nothing ran: the variables were refused. graphql-js words that refusal (and Apollo and the masking recognise
    // its words), so it is asked for the errors; this costs only on the refusal.
    if (result.data === undefined && isCompiledQuery(query)) {
      const operation = getOperationAST(document, operationName);
      const coerced = operation && getVariableValues(schema, operation.variableDefinitions ?? [], variables ?? {});
      if (coerced?.errors) return { errors: coerced.errors };
    }
    const errors = result.errors.map(asGraphqlJsError);
    return result.data === undefined ? { errors } : { errors, data: result.data };
  }

  /** Results with errors run() already has, for Apollo's own execution step to report (see run). */
  const ran = new WeakMap<object, ExecutionResult>();

  /**
   * Runs a resolved operation from a plugin's `responseForOperation`, which spares Apollo's execution step its fixed
   * costs (an Accept negotiation for incremental delivery, execution hooks, a gateway request context) on every
   * request. A result without errors is the response as that step would build it; a result with errors is kept
   * and `null` returned, so that Apollo executes as usual, gets this result from the gateway (nothing runs twice),
   * and reports its errors exactly as it always does.
   */
  async function run(
    requestContext: {
      readonly queryHash?: string;
      readonly document: DocumentNode;
      readonly operation?: unknown;
      readonly operationName: string | null;
      readonly request: { readonly variables?: Record<string, unknown> };
      readonly contextValue: object;
    },
    compiled?: CompiledQuery | ExecutionResult,
  ): Promise<ExecutionResult | null> {
    if (!requestContext.operation || requestContext.queryHash === undefined) return null;
    const operationName = requestContext.operationName ?? undefined;
    const result = compiled
      ? await runCompiled(
          compiled,
          requestContext.document,
          operationName,
          requestContext.request.variables,
          requestContext.contextValue,
        )
      : await execute(
          requestContext.queryHash,
          requestContext.document,
          operationName,
          requestContext.request.variables,
          requestContext.contextValue,
        );
    if (!result.errors?.length) return result;
    ran.set(requestContext.contextValue, result);
    return null;
  }

  const executor: Executor = (requestContext) => {
    const result = ran.get(requestContext.context);
    if (result) {
      ran.delete(requestContext.context);
      return Promise.resolve(result) as ReturnType<Executor>;
    }
    // The name the client asked for: Apollo's operationName is the resolved operation's, null when none resolved.
    return execute(
      requestContext.queryHash,
      requestContext.document,
      requestContext.request.operationName ?? requestContext.operationName ?? undefined,
      requestContext.request.variables,
      requestContext.context,
    ) as ReturnType<Executor>;
  };

  let stopped = false;
  const gateway: Gateway = {
    onSchemaLoadOrUpdate(callback) {
      // Apollo asks before load(); the schema never changes, so it is told once, now.
      callback({ apiSchema: schema, coreSupergraphSdl: '' });
      return () => {};
    },
    load: async () => ({ executor }),
    stop: async () => {
      stopped = true;
      compiled.clear();
    },
  };

  return {
    gateway,
    execute,
    run,
    /** Compiled operations held now (for tests and metrics). */
    // eslint-disable-next-line no-restricted-syntax -- one object per app, made at start-up
    get size() {
      return compiled.size;
    },
    // eslint-disable-next-line no-restricted-syntax -- one object per app, made at start-up
    get stopped() {
      return stopped;
    },
  };
}
