import type { Request, Response } from 'express';
import type { ErrorCode, InvalidField } from '../domain/errors.js';

/** Failures that only HTTP itself can produce, beside the domain's codes. */
export type HttpErrorCode =
  | ErrorCode
  | 'INTERNAL_SERVER_ERROR'
  | 'ROUTE_NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'MALFORMED_REQUEST'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'NOT_ACCEPTABLE'
  | 'SERVICE_UNAVAILABLE';

interface ProblemType {
  readonly status: number;
  readonly title: string;
  readonly slug: string;
}

/**
 * The one mapping from error code to HTTP. GraphQL uses the same codes as `extensions.code`;
 * REST uses the status, title and `type` URI (`/problems/<slug>`, documented in the README).
 */
export const PROBLEM_TYPES: Readonly<Record<HttpErrorCode, ProblemType>> = {
  UNAUTHENTICATED: { status: 401, title: 'Authentication required', slug: 'unauthenticated' },
  INSUFFICIENT_SCOPE: { status: 403, title: 'Insufficient scope', slug: 'insufficient-scope' },
  FORBIDDEN: { status: 403, title: 'Forbidden', slug: 'forbidden' },
  NOT_FOUND: { status: 404, title: 'Not found', slug: 'not-found' },
  BAD_USER_INPUT: { status: 422, title: 'Invalid input', slug: 'invalid-input' },
  INVALID_TRANSITION: { status: 409, title: 'Invalid status transition', slug: 'invalid-transition' },
  PRECONDITION_FAILED: { status: 412, title: 'Precondition failed', slug: 'precondition-failed' },
  PRECONDITION_REQUIRED: { status: 428, title: 'Precondition required', slug: 'precondition-required' },
  INTERNAL_SERVER_ERROR: { status: 500, title: 'Internal server error', slug: 'internal' },
  ROUTE_NOT_FOUND: { status: 404, title: 'No such resource', slug: 'route-not-found' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed', slug: 'method-not-allowed' },
  MALFORMED_REQUEST: { status: 400, title: 'Malformed request', slug: 'malformed-request' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Request body too large', slug: 'payload-too-large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type', slug: 'unsupported-media-type' },
  NOT_ACCEPTABLE: { status: 406, title: 'Not acceptable', slug: 'not-acceptable' },
  SERVICE_UNAVAILABLE: { status: 503, title: 'Service unavailable', slug: 'service-unavailable' },
};

export function problemTypeUri(code: HttpErrorCode): string {
  return `/problems/${PROBLEM_TYPES[code].slug}`;
}

/** Writes an RFC 9457 problem details response. */
export function sendProblem(
  req: Request,
  res: Response,
  code: HttpErrorCode,
  detail: string,
  extra: { invalid?: readonly InvalidField[]; headers?: Record<string, string> } = {},
): void {
  const type = PROBLEM_TYPES[code];
  for (const [name, value] of Object.entries(extra.headers ?? {})) res.setHeader(name, value);
  res.setHeader('Cache-Control', 'no-store');
  res
    .status(type.status)
    .type('application/problem+json')
    .send(
      JSON.stringify({
        type: problemTypeUri(code),
        title: type.title,
        status: type.status,
        detail,
        instance: req.originalUrl,
        code,
        ...(extra.invalid ? { errors: extra.invalid } : {}),
      }),
    );
}
