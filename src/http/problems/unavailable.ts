import { DomainError, RETRY_AFTER_SECONDS } from '../../domain/errors.js';

/**
 * The one decision about a dependency that is down, for every transport. It is the server's condition, not the
 * request's: the answer is 503 with Retry-After, so that clients and balancers try again (elsewhere) shortly,
 * whatever part of the request did succeed. REST and the last-resort handler send it as problem details, GraphQL
 * over HTTP as the status of a result whose errors say SERVICE_UNAVAILABLE, authentication as a 503 challenge, and
 * the server itself while it starts.
 */
export const UNAVAILABLE_STATUS = 503;

/** The headers of every 503 answer. */
export const RETRY_LATER: Readonly<Record<'Retry-After', string>> = Object.freeze({
  'Retry-After': String(RETRY_AFTER_SECONDS),
});

/** A failure that means a dependency is down: the domain's error, or a GraphQL error (formatted or not) with its code. */
export function isUnavailable(error: unknown): boolean {
  if (error instanceof DomainError) return error.code === 'SERVICE_UNAVAILABLE';
  return (error as { extensions?: { code?: unknown } } | null)?.extensions?.code === 'SERVICE_UNAVAILABLE';
}
