import { unwrapResolverError } from '@apollo/server/errors';
import type { ExecutionResult, FormattedExecutionResult, GraphQLFormattedError } from 'graphql';
import { DomainError } from '../domain/errors.js';

/** Codes that describe the client's request and may be shown as they are. */
const CLIENT_CODES = new Set([
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'BAD_USER_INPUT',
  'BAD_REQUEST',
  'OPERATION_RESOLUTION_FAILURE',
  'PERSISTED_QUERY_NOT_FOUND',
  'PERSISTED_QUERY_NOT_SUPPORTED',
  'TOO_MANY_SUBSCRIPTIONS',
]);

/** Unexpected errors are masked: the client gets a code and the request id, the log gets the rest. */
export function formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError {
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
      },
    };
  }
  const code = formatted.extensions?.code;
  if (typeof code === 'string' && CLIENT_CODES.has(code)) {
    return { message: formatted.message, ...where, extensions: { code } };
  }
  return { message: 'Internal server error', ...where, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
}

export function isUnexpected(error: unknown): boolean {
  const original = unwrapResolverError(error);
  if (original instanceof DomainError) return false;
  const code = (error as { extensions?: { code?: unknown } }).extensions?.code;
  return !(typeof code === 'string' && CLIENT_CODES.has(code));
}

/**
 * One streamed result as subscribers receive it: errors masked (and the unexpected ones logged),
 * and the outbox id of the event it reports in `extensions.eventId`.
 */
export function formatResult(
  result: ExecutionResult,
  ctx: { eventId?: string } | undefined,
  logUnexpected: (error: unknown) => void,
): FormattedExecutionResult {
  for (const error of result.errors ?? []) if (isUnexpected(error)) logUnexpected(error);
  return {
    ...(result.data !== undefined ? { data: result.data } : {}),
    ...(result.errors?.length ? { errors: result.errors.map((e) => formatError(e.toJSON(), e)) } : {}),
    ...(ctx?.eventId ? { extensions: { ...result.extensions, eventId: ctx.eventId } } : {}),
  };
}
