import express, { type Request, type Response } from 'express';
import { PROBLEM_TYPES, traceIdMember, type ApiErrorCode } from './catalogue.js';

/** The two media types a GraphQL-over-HTTP answer may have (application/json is also the only request body's). */
export const JSON_TYPE = 'application/json';
export const GRAPHQL_RESPONSE_TYPE = 'application/graphql-response+json';

export type GraphqlMediaType = typeof JSON_TYPE | typeof GRAPHQL_RESPONSE_TYPE;

/**
 * The media type a response will use; Apollo negotiates the same way for results it writes. Express's own
 * negotiation (req.accepts) runs on the header alone, as Apollo's plugins have no Express request.
 */
export function mediaTypeFor(accept: string | undefined): GraphqlMediaType | false {
  if (!accept) return JSON_TYPE;
  const headerOnly: Pick<Request, 'headers'> = { headers: { accept } };
  return express.request.accepts.call(headerOnly as Request, JSON_TYPE, GRAPHQL_RESPONSE_TYPE) as
    GraphqlMediaType | false;
}

/** The media type a GraphQL answer to this request will use, or false when the client accepts neither. */
export const responseMediaType = (req: Request) =>
  req.headers.accept ? (req.accepts([JSON_TYPE, GRAPHQL_RESPONSE_TYPE]) as GraphqlMediaType | false) : JSON_TYPE;

/**
 * The one rule for a GraphQL request error (the document does not parse or validate, its operation cannot be
 * resolved or admitted: no `data`): 200 for application/json, as the GraphQL-over-HTTP spec says for that legacy type,
 * and its own status for application/graphql-response+json. Only a 400 is softened; other statuses (405 for a GET
 * mutation, 429 for the rate budget) stay. Every transport that answers request errors over HTTP uses it.
 */
export function requestErrorStatus(mediaType: GraphqlMediaType | false, status: number): number {
  return status === 400 && mediaType === JSON_TYPE ? 200 : status;
}

/**
 * Writes a GraphQL answer once: its status and head (with the headers set so far) in one writeHead, the body in one
 * end, without Express's res.send (which copies bodies of 1,000 characters or more into a Buffer first).
 */
export function writeAnswer(res: Response, status: number, type: GraphqlMediaType, body: string): void {
  res.writeHead(status, {
    'content-type': `${type}; charset=utf-8`,
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/**
 * A GraphQL-over-HTTP answer that is only `{ errors }`, with the status the catalogue gives its code: how every
 * GraphQL transport on HTTP (/graphql, /graphql/stream) and the checks in front of them refuse a request.
 */
export function sendGraphqlError(
  req: Request,
  res: Response,
  message: string,
  code: ApiErrorCode,
  headers: Readonly<Record<string, string>> = {},
): void {
  const type = responseMediaType(req) || JSON_TYPE;
  for (const name in headers) res.setHeader(name, headers[name]!);
  res.vary('Accept');
  res.setHeader('Cache-Control', 'no-store');
  writeAnswer(
    res,
    PROBLEM_TYPES[code].status,
    type,
    JSON.stringify({ errors: [{ message, extensions: { code, ...traceIdMember() } }] }),
  );
}

/** The code of an error a GraphQL library answered with an HTTP status alone (graphql-sse's protocol errors). */
const CODE_OF_STATUS: Readonly<Record<number, ApiErrorCode>> = {
  400: 'BAD_REQUEST',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  406: 'NOT_ACCEPTABLE',
  // A stream or operation id already in use: the request is not one the protocol allows now.
  409: 'BAD_REQUEST',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
};

/**
 * A refusal a GraphQL library wrote itself — a status, and `{ errors }` without codes or no body at all — answered as
 * every GraphQL error is: each error keeps its message (and a code it has) and gains the `extensions.code` of its
 * status (the status and the library's headers, such as Allow, are kept); a bodiless one says `message`.
 */
export function sendLibraryRefusal(
  req: Request,
  res: Response,
  refusal: { status: number; body: string | null; headers?: Readonly<Record<string, string>>; message: string },
): void {
  const code = CODE_OF_STATUS[refusal.status] ?? (refusal.status >= 500 ? 'INTERNAL_SERVER_ERROR' : 'BAD_REQUEST');
  const extensions = { code, ...traceIdMember() };
  let errors: { message: unknown; extensions?: Record<string, unknown> }[] = [{ message: refusal.message, extensions }];
  try {
    const parsed = JSON.parse(refusal.body ?? 'null') as { errors?: unknown } | null;
    if (Array.isArray(parsed?.errors) && parsed.errors.length > 0) {
      // An error that already has a code (our own, such as TOO_MANY_SUBSCRIPTIONS) keeps it.
      errors = (parsed.errors as { message?: unknown; extensions?: Record<string, unknown> }[]).map((e) => ({
        ...e,
        message: typeof e.message === 'string' ? e.message : refusal.message,
        extensions: { ...extensions, ...e.extensions },
      }));
    }
  } catch {
    // Not JSON: the status says it all.
  }
  const type = responseMediaType(req) || JSON_TYPE;
  for (const [name, value] of Object.entries(refusal.headers ?? {})) {
    if (name.toLowerCase() !== 'content-type') res.setHeader(name, value);
  }
  res.vary('Accept');
  res.setHeader('Cache-Control', 'no-store');
  writeAnswer(res, refusal.status, type, JSON.stringify({ errors }));
}
