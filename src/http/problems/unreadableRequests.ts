import type { NextFunction, Request, Response } from 'express';
import { sendGraphqlError } from './graphqlResponse.js';
import { sendProblem } from './problemDetails.js';

/**
 * Failures of the request itself that Express and body-parser report as errors: a body that is not JSON, too large
 * (or a form with more fields than its route reads), in another charset, in a content coding this server does not
 * read, or not valid for its Content-Encoding (a corrupt gzip, deflate or br stream), and a path that is not
 * percent-encoded UTF-8. They are the client's to fix, so they must never surface as a 500.
 */
export interface UnreadableRequest {
  readonly status: 400 | 413 | 415;
  readonly detail: string;
  /** Headers the answer carries: Accept-Encoding for a content coding not read here (RFC 9110 §15.5.16). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** The content codings a request body may come in (besides none): what body-parser inflates on every Node we run on. */
export const READABLE_CONTENT_CODINGS: readonly string[] = ['gzip', 'deflate', 'br'];

/** What a 415 for a content coding not read here says, and the header that names those that are. */
export const CODING_REFUSED = {
  detail: `The body's Content-Encoding is not one this server reads: send it without one, or as ${READABLE_CONTENT_CODINGS.join(', ')}.`,
  headers: { 'Accept-Encoding': READABLE_CONTENT_CODINGS.join(', ') },
} as const;

/** What an error thrown while reading a request means for the client, or null when it is not such a failure. */
export function unreadableRequest(error: unknown, bodyLimit: string): UnreadableRequest | null {
  if (typeof error !== 'object' || error === null) return null;
  const { type, status } = error as { type?: unknown; status?: unknown };
  switch (type) {
    case 'entity.parse.failed':
      return { status: 400, detail: 'The body is not valid JSON.' };
    case 'entity.too.large':
      return { status: 413, detail: `The body is larger than ${bodyLimit}.` };
    case 'parameters.too.many':
      return { status: 413, detail: 'The form has more fields than this endpoint reads.' };
    case 'charset.unsupported':
      return {
        status: 415,
        detail: 'Send the body as UTF-8 JSON, without content encoding or as gzip, deflate or br.',
      };
    case 'encoding.unsupported':
      return { status: 415, ...CODING_REFUSED };
    case 'request.aborted':
    case 'request.size.invalid':
      return { status: 400, detail: 'The body could not be read completely.' };
  }
  if (error instanceof URIError) return { status: 400, detail: 'The path is not valid percent-encoded UTF-8.' };
  // body-parser passes a decompression failure on as a bare 400 wrapping zlib's error.
  if (status === 400) {
    return { status: 400, detail: 'The body could not be decoded as its Content-Encoding says.' };
  }
  return null;
}

/** The problem type for each status, shared by REST and the app's last-resort handler. */
export const UNREADABLE_PROBLEM_CODES = {
  400: 'MALFORMED_REQUEST',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
} as const;

/** GraphQL transports name the same failures with these `extensions.code` values. */
export const UNREADABLE_GRAPHQL_CODES = {
  400: 'BAD_REQUEST',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
} as const;

/** Answers an unreadable request as problem details; returns false, answering nothing, for any other error. */
export function sendUnreadableProblem(req: Request, res: Response, error: unknown, bodyLimit: string): boolean {
  const refused = unreadableRequest(error, bodyLimit);
  if (!refused) return false;
  sendProblem(req, res, UNREADABLE_PROBLEM_CODES[refused.status], refused.detail, {
    ...(refused.headers ? { headers: { ...refused.headers } } : {}),
  });
  return true;
}

/** For a GraphQL transport that parses its own body (graphql-sse): the same failures as GraphQL errors. */
export function refuseUnreadableGraphql(bodyLimit: string) {
  return (error: unknown, req: Request, res: Response, next: NextFunction) => {
    const refused = unreadableRequest(error, bodyLimit);
    if (!refused || res.headersSent) return next(error);
    sendGraphqlError(req, res, refused.detail, UNREADABLE_GRAPHQL_CODES[refused.status], refused.headers);
  };
}
