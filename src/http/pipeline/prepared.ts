import { InMemoryLRUCache } from '@apollo/utils.keyvaluecache';
import {
  getOperationAST,
  Kind,
  parse,
  validate,
  type DocumentNode,
  type ExecutionResult,
  type GraphQLError,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ParseOptions,
  type ValidationRule,
} from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { LRUCache } from 'lru-cache';
import { Counter, type Registry } from 'prom-client';
import { tracing } from '../../tracing.js';
import { cacheControlHeader, derivePolicy, hasConditionalFields, type CachePolicy } from './cachePolicy.js';
import { costOf } from './cost.js';
import { deprecatedUses } from './deprecations.js';
import { limitErrors, type DirectiveRules, type StaticLimits } from './limits.js';

/** What one operation of a prepared document needs at run time, worked out once. */
export interface PreparedOperation {
  readonly operation: OperationDefinitionNode;
  /**
   * graphql-jit's compiled query, or the errors compiling it gave; none for a subscription. Compiled on the
   * operation's first run, not with the record: a document may hold many operations and a request runs one.
   */
  compiled(): CompiledQuery | ExecutionResult | undefined;
  /** The cost (objects it may return), when it reads no variable. */
  readonly cost: number | undefined;
  /** The cache policy and its `Cache-Control` header, when no @skip/@include makes them depend on variables. */
  readonly policy: CachePolicy | undefined;
  readonly cacheControl: string | undefined;
}

/** A document that parsed, kept within the limits and validated: everything a request for it needs but its data. */
export interface PreparedDocument {
  /** The sha256 of `source`. */
  readonly hash: string;
  readonly source: string;
  readonly document: DocumentNode;
  /** The deprecated members it uses (deprecations.ts). */
  readonly deprecations: readonly string[];
  /** Its operations, by their node in `document` (the one getOperationAST resolves). */
  readonly operations: ReadonlyMap<OperationDefinitionNode, PreparedOperation>;
}

/** Why a document was not prepared: the stage that refused it, and its errors as graphql-js gave them. */
export type Refusal = { readonly stage: 'parse' | 'limits' | 'validation'; readonly errors: readonly GraphQLError[] };

/**
 * The prepared-operation records: one per document, found by its hash (a text by the hash sha256() remembers for
 * it), built once, when the document first validates, and kept least recently used first out within `maxBytes`. The
 * one place a document is parsed, checked against the static limits and validated, for every transport; Apollo finds
 * its documents here (persistedDocuments.ts) and so neither parses nor validates them.
 */
export function createPreparedDocuments(deps: {
  schema: GraphQLSchema;
  parseOptions: ParseOptions;
  limits: StaticLimits;
  directives: DirectiveRules;
  /** graphql's specified rules and this deployment's own (introspection in production). */
  rules: readonly ValidationRule[];
  registry: Registry;
  maxBytes?: number;
}) {
  const { schema, parseOptions, limits, directives, rules } = deps;
  /** The operations compiled so far, and what they compiled to. */
  const compiledOf = new WeakMap<PreparedOperation, CompiledQuery | ExecutionResult>();
  /** What keeping a record costs: its source, its AST, and the code compiled so far with the closures around it. */
  const sizeOf = (record: PreparedDocument) => {
    let size = record.source.length + InMemoryLRUCache.sizeCalculation(record.document);
    for (const operation of record.operations.values()) {
      const compiled = compiledOf.get(operation);
      if (compiled && isCompiledQuery(compiled)) size += 2 * compiled.query.toString().length + 1024;
    }
    return size;
  };
  const records = new LRUCache<string, PreparedDocument>({
    maxSize: deps.maxBytes ?? 48 * 2 ** 20,
    sizeCalculation: sizeOf,
  });
  const parses = new Counter({
    name: 'graphql_document_parses_total',
    help: 'GraphQL documents parsed, by who parsed them: `prepare` builds a record once per document; `apollo` is a document Apollo had to parse itself (one that did not validate, mostly).',
    labelNames: ['by'] as const,
    registers: [deps.registry],
  });
  const preparedParses = parses.labels('prepare');
  const apolloParses = parses.labels('apollo');
  // Both series exist from the start, at 0.
  preparedParses.inc(0);
  apolloParses.inc(0);

  function prepareOperation(
    hash: string,
    document: DocumentNode,
    operation: OperationDefinitionNode,
    conditional: boolean,
  ): PreparedOperation {
    const { cost, readsVariables } = costOf(schema, document, operation, {});
    const policy = conditional ? undefined : derivePolicy(schema, document, operation);
    const prepared: PreparedOperation = {
      operation,
      compiled() {
        if (operation.operation === 'subscription') return undefined;
        let compiled = compiledOf.get(prepared);
        if (compiled === undefined) {
          compiled = compileQuery(schema, document, operation.name?.value);
          compiledOf.set(prepared, compiled);
          // Counted from now on: lru-cache sizes an entry when it is set, so the record is set again.
          const record = records.peek(hash);
          if (record?.operations.get(operation) === prepared) {
            records.delete(hash);
            records.set(hash, record);
          }
        }
        return compiled;
      },
      cost: readsVariables ? undefined : cost,
      policy,
      cacheControl: policy && cacheControlHeader(policy),
    };
    return prepared;
  }

  function build(source: string, hash: string): PreparedDocument | Refusal {
    let document: DocumentNode;
    const parsed = tracing.enabled ? tracing.start('graphql.parse') : undefined;
    try {
      preparedParses.inc();
      document = parse(source, parseOptions);
    } catch (error) {
      tracing.fail(parsed, 'GRAPHQL_PARSE_FAILED');
      parsed?.end();
      return { stage: 'parse', errors: [error as GraphQLError] };
    }
    const tooLarge = limitErrors(document, limits, directives);
    if (tooLarge.length) tracing.fail(parsed, 'GRAPHQL_VALIDATION_FAILED');
    parsed?.end();
    if (tooLarge.length) return { stage: 'limits', errors: tooLarge };
    const validated = tracing.enabled ? tracing.start('graphql.validate') : undefined;
    const invalid = validate(schema, document, rules);
    if (invalid.length) tracing.fail(validated, 'GRAPHQL_VALIDATION_FAILED');
    validated?.end();
    if (invalid.length) return { stage: 'validation', errors: invalid };
    const conditional = hasConditionalFields(document);
    const operations = new Map<OperationDefinitionNode, PreparedOperation>();
    for (const definition of document.definitions)
      if (definition.kind === Kind.OPERATION_DEFINITION)
        operations.set(definition, prepareOperation(hash, document, definition, conditional));
    const record = { hash, source, document, deprecations: deprecatedUses(schema, document), operations };
    records.set(hash, record);
    return record;
  }

  return {
    /** The record of the document with this sha256, if it has one. */
    get: (hash: string): PreparedDocument | undefined => records.get(hash),

    /** The record of `source` (whose sha256 is `hash`), built now if it has none; else why it cannot have one. */
    prepare(source: string, hash: string): PreparedDocument | Refusal {
      return records.get(hash) ?? build(source, hash);
    },

    /** Builds the records of a trusted-documents manifest at start; a document that does not validate gets none. */
    prewarm(manifest: ReadonlyMap<string, string>) {
      for (const [hash, source] of manifest) build(source, hash);
    },

    /** Apollo parsed a document itself: counted, since with its records in place it should not have to. */
    parsedByApollo: () => apolloParses.inc(),

    /** Records held now. */
    // eslint-disable-next-line no-restricted-syntax -- one object per app, made at start-up
    get size() {
      return records.size;
    },
  };
}

export type PreparedDocuments = ReturnType<typeof createPreparedDocuments>;

export const isRefusal = (outcome: PreparedDocument | Refusal): outcome is Refusal => 'stage' in outcome;

/** The operation a request names in a record (getOperationAST's rule), or undefined when none is found. */
export function operationIn(record: PreparedDocument, operationName: string | null | undefined) {
  const operation = getOperationAST(record.document, operationName);
  return operation ? record.operations.get(operation) : undefined;
}
