import type { NextFunction, Request, Response } from 'express';
import { ProvisioningError, type ProvisioningFailure } from '../../domain/directory.js';
import { isUnavailable, RETRY_LATER } from './unavailable.js';
import { unreadableRequest } from './unreadableRequests.js';

export const SCIM_ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
/** RFC 7644 §8.1: what SCIM answers with; requests may also come as application/json. */
export const SCIM_MEDIA_TYPE = 'application/scim+json; charset=utf-8';

/**
 * Every failure /scim/v2 answers, with its status and, where RFC 7644 §3.12 defines one, its `scimType`. The SCIM
 * transport names a failure; only this table decides its status.
 */
export const SCIM_FAILURES = {
  invalidFilter: { status: 400, scimType: 'invalidFilter' },
  tooMany: { status: 400, scimType: 'tooMany' },
  invalidSyntax: { status: 400, scimType: 'invalidSyntax' },
  invalidPath: { status: 400, scimType: 'invalidPath' },
  noTarget: { status: 400, scimType: 'noTarget' },
  invalidValue: { status: 400, scimType: 'invalidValue' },
  mutability: { status: 400, scimType: 'mutability' },
  uniqueness: { status: 409, scimType: 'uniqueness' },
  unauthorized: { status: 401 },
  forbidden: { status: 403 },
  notFound: { status: 404 },
  methodNotAllowed: { status: 405 },
  preconditionFailed: { status: 412 },
  tooLarge: { status: 413 },
  unsupportedMediaType: { status: 415 },
  rateLimited: { status: 429 },
  internal: { status: 500 },
  notImplemented: { status: 501 },
  unavailable: { status: 503 },
} as const satisfies Record<string, { status: number; scimType?: string }>;

export type ScimFailure = keyof typeof SCIM_FAILURES;

const FROM_PROVISIONING: Record<ProvisioningFailure, ScimFailure> = {
  NOT_FOUND: 'notFound',
  UNIQUENESS: 'uniqueness',
  INVALID_VALUE: 'invalidValue',
  PRECONDITION_FAILED: 'preconditionFailed',
};

const FROM_UNREADABLE = { 400: 'invalidSyntax', 413: 'tooLarge', 415: 'unsupportedMediaType' } as const;

/** A failure of a SCIM request, thrown by the transport and answered by `scimErrors`. */
export class ScimError extends Error {
  constructor(
    readonly failure: ScimFailure,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'ScimError';
  }
}

/** The SCIM error message (RFC 7644 §3.12): `status` is a string, `scimType` only where one applies. */
export function scimErrorBody(failure: ScimFailure, detail: string) {
  const known: { status: number; scimType?: string } = SCIM_FAILURES[failure];
  return {
    schemas: [SCIM_ERROR_SCHEMA],
    status: String(known.status),
    ...(known.scimType ? { scimType: known.scimType } : {}),
    detail,
  };
}

export function sendScimError(
  res: Response,
  failure: ScimFailure,
  detail: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  res
    .status(SCIM_FAILURES[failure].status)
    .set({ 'Cache-Control': 'no-store', ...headers })
    .type(SCIM_MEDIA_TYPE)
    .send(JSON.stringify(scimErrorBody(failure, detail)));
}

/** PostgreSQL's unique_violation: a uniqueness check lost to a concurrent write the directory's turn missed. */
const UNIQUE_VIOLATION = '23505';

/**
 * The SCIM transport's translator: every error that reaches it is answered in the SCIM error schema, never as
 * problem details and never as a bare 500. Unexpected errors are logged with the request id and masked.
 */
export function scimErrors(bodyLimit: string) {
  return (error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    if (error instanceof ScimError) return sendScimError(res, error.failure, error.message, error.headers);
    if (error instanceof ProvisioningError) return sendScimError(res, FROM_PROVISIONING[error.code], error.message);
    if (isUnavailable(error)) return sendScimError(res, 'unavailable', 'Retry shortly.', RETRY_LATER);
    const unreadable = unreadableRequest(error, bodyLimit);
    if (unreadable) return sendScimError(res, FROM_UNREADABLE[unreadable.status], unreadable.detail);
    if ((error as { code?: unknown } | null)?.code === UNIQUE_VIOLATION) {
      return sendScimError(res, 'uniqueness', 'Another resource already has that value.');
    }
    req.log?.error({ err: error }, 'unexpected SCIM error');
    sendScimError(res, 'internal', `Internal error; quote request id ${String(req.id)}.`);
  };
}
