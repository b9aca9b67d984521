import { unwrapResolverError } from '@apollo/server/errors';
import {
  GraphQLError,
  Kind,
  type GraphQLErrorOptions,
  type ExecutionResult,
  type FormattedExecutionResult,
  type GraphQLFormattedError,
} from 'graphql';
import { DomainError } from '../../domain/errors.js';
import { isApiErrorCode, traceIdMember, type ApiErrorCode } from './catalogue.js';

/** Codes (of the catalogue in catalogue.ts) that describe the client's request and may be shown as they are. */
const CLIENT_CODES: ReadonlySet<string> = new Set<ApiErrorCode>([
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'BAD_USER_INPUT',
  'BAD_REQUEST',
  'OPERATION_RESOLUTION_FAILURE',
  'PERSISTED_QUERY_NOT_FOUND',
  'PERSISTED_QUERY_NOT_SUPPORTED',
  'PERSISTED_QUERY_HASH_MISMATCH',
  'PERSISTED_QUERY_NOT_TRUSTED',
  'TOO_MANY_SUBSCRIPTIONS',
  'QUERY_TOO_COMPLEX',
  'RATE_LIMITED',
]);

/** A GraphQL error that reports the client's request, with its code from the catalogue. */
export const clientError = (
  message: string,
  code: ApiErrorCode,
  extensions: Record<string, unknown> = {},
  options: Pick<GraphQLErrorOptions, 'nodes'> = {},
) => new GraphQLError(message, { ...options, extensions: { ...extensions, code } });

/** The catalogue code an error carries; anything else is reported as the masked internal error. */
export function codeOf(error: { extensions?: Record<string, unknown> }): ApiErrorCode {
  const code = error.extensions?.code;
  return isApiErrorCode(code) ? code : 'INTERNAL_SERVER_ERROR';
}

/**
 * Variable coercion errors come from graphql-js without a code. Apollo tags them BAD_USER_INPUT on
 * HTTP; the streaming transports execute with graphql-js directly, so they are recognised here too.
 */
function isVariableError(error: unknown): boolean {
  if (!(error instanceof GraphQLError)) return false;
  const node = error.nodes?.length === 1 ? error.nodes[0] : undefined;
  return node?.kind === Kind.VARIABLE_DEFINITION && error.message.startsWith('Variable "$');
}

function clientCode(formatted: GraphQLFormattedError, error: unknown): ApiErrorCode | undefined {
  const code = formatted.extensions?.code;
  if (isApiErrorCode(code) && CLIENT_CODES.has(code)) return code;
  return isVariableError(error) ? 'BAD_USER_INPUT' : undefined;
}

/** graphql-js names the schema's fields and types in "Did you mean …?"; production keeps its schema to itself. */
const SUGGESTION = / ?Did you mean [^?]*\?/g;

export interface ErrorPolicy {
  readonly hideSuggestions: boolean;
}

/** Unexpected errors are masked: the client gets a code and the request id, the log gets the rest. */
export function formatError(
  formatted: GraphQLFormattedError,
  error: unknown,
  policy: ErrorPolicy = { hideSuggestions: false },
): GraphQLFormattedError {
  const original = unwrapResolverError(error);
  const where = {
    ...(formatted.locations ? { locations: formatted.locations } : {}),
    ...(formatted.path ? { path: formatted.path } : {}),
  };
  if (original instanceof DomainError) {
    return {
      message: original.message,
      ...where,
      extensions: {
        code: original.code,
        ...(original.details.invalid ? { invalid: original.details.invalid } : {}),
        // RFC 9470's challenge parameters, for a client to sign in again with.
        ...(original.details.stepUp
          ? { acrValues: original.details.stepUp.acrValues, maxAge: original.details.stepUp.maxAge }
          : {}),
        ...traceIdMember(),
      },
    };
  }
  const code = clientCode(formatted, error);
  if (code) {
    const message = policy.hideSuggestions ? formatted.message.replace(SUGGESTION, '') : formatted.message;
    const cost = formatted.extensions?.cost;
    return { message, ...where, extensions: { code, ...(cost ? { cost } : {}), ...traceIdMember() } };
  }
  const internal: ApiErrorCode = 'INTERNAL_SERVER_ERROR';
  return { message: 'Internal server error', ...where, extensions: { code: internal, ...traceIdMember() } };
}

export function isUnexpected(error: unknown): boolean {
  const original = unwrapResolverError(error);
  if (original instanceof DomainError) return false;
  const extensions = (error as { extensions?: Record<string, unknown> }).extensions ?? {};
  return !clientCode({ message: '', extensions }, error);
}

/**
 * One streamed result as subscribers receive it: errors masked (and the unexpected ones logged),
 * and the outbox id of the event it reports in `extensions.eventId`.
 */
export function formatResult(
  result: ExecutionResult,
  ctx: { eventId?: string } | undefined,
  logUnexpected: (error: unknown) => void,
  policy?: ErrorPolicy,
  extensions?: Record<string, unknown>,
): FormattedExecutionResult {
  for (const error of result.errors ?? []) if (isUnexpected(error)) logUnexpected(error);
  const merged = {
    ...result.extensions,
    ...extensions,
    ...(ctx?.eventId ? { eventId: ctx.eventId } : {}),
  };
  return {
    ...(result.data !== undefined ? { data: result.data } : {}),
    ...(result.errors?.length ? { errors: result.errors.map((e) => formatError(e.toJSON(), e, policy)) } : {}),
    ...(Object.keys(merged).length ? { extensions: merged } : {}),
  };
}
