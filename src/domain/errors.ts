/**
 * The domain's error codes: the expected failures of its use cases. Each is registered in the API's one error
 * catalogue (http/problems/catalogue.ts, which fails to compile otherwise), whose translators give it a problem type
 * and status on REST and an `extensions.code` on GraphQL.
 */
export const ERROR_CODES = [
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'INSUFFICIENT_SCOPE',
  'INSUFFICIENT_USER_AUTHENTICATION',
  'NOT_FOUND',
  'BAD_USER_INPUT',
  'INVALID_TRANSITION',
  'PRECONDITION_FAILED',
  'PRECONDITION_REQUIRED',
  'NOT_EDITABLE',
  'IDEMPOTENCY_KEY_IN_USE',
  'IDEMPOTENCY_KEY_REUSED',
  'RATE_LIMITED',
  'SERVICE_UNAVAILABLE',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** One invalid input: where (a JSON pointer into the request) and why. */
export interface InvalidField {
  readonly pointer: string;
  readonly reason: string;
}

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: {
      readonly invalid?: readonly InvalidField[];
      readonly scope?: string;
      /** INSUFFICIENT_USER_AUTHENTICATION: the `acr_values` and `max_age` to ask the authorization server for. */
      readonly stepUp?: { readonly acrValues: string; readonly maxAge: number };
    } = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const notFound = (what: string) => new DomainError('NOT_FOUND', `${what} was not found.`);

export const preconditionFailed = (failed: 'if-match' | 'if-none-match' = 'if-match') =>
  new DomainError(
    'PRECONDITION_FAILED',
    failed === 'if-match'
      ? 'The order has changed since the version you sent; read it again.'
      : 'The order exists in a version If-None-Match excludes (* excludes every version); nothing was changed.',
  );

/** An error lists at most this many fields, so that a body of junk members cannot make it larger than the body. */
export const MAX_LISTED_INVALID = 20;

export const invalidInput = (invalid: readonly InvalidField[]) =>
  new DomainError(
    'BAD_USER_INPUT',
    invalid.length === 1
      ? // The empty JSON pointer is the whole document: say so instead of an empty name before the colon.
        `${invalid[0]!.pointer || 'the body'}: ${invalid[0]!.reason}`
      : invalid.length > MAX_LISTED_INVALID
        ? `${invalid.length} fields are invalid; the first ${MAX_LISTED_INVALID} are listed.`
        : `${invalid.length} fields are invalid.`,
    { invalid: invalid.slice(0, MAX_LISTED_INVALID) },
  );

/** Seconds a client should wait before retrying a request refused because a dependency is down. */
export const RETRY_AFTER_SECONDS = 1;

/**
 * The database cannot be reached (refused, shut down, connection lost or timed out). REST answers
 * 503 with Retry-After, GraphQL SERVICE_UNAVAILABLE. A write whose connection broke during commit may
 * have happened; its Idempotency-Key is what makes the retry safe.
 */
export const databaseUnavailable = (cause: unknown) =>
  Object.assign(new DomainError('SERVICE_UNAVAILABLE', 'The database is unavailable; retry shortly.'), { cause });
