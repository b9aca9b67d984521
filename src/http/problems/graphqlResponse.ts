import express, { type Request, type Response } from 'express';
import { traceIdMember, type ApiErrorCode } from './catalogue.js';

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
 * A GraphQL-over-HTTP answer that is only `{ errors }`, 400 unless told otherwise: how every GraphQL transport on
 * HTTP (/graphql, /graphql/stream) and the checks in front of them refuse a request.
 */
export function sendGraphqlError(
  req: Request,
  res: Response,
  message: string,
  code: ApiErrorCode,
  opts: { status?: number; headers?: Record<string, string> } = {},
): void {
  const type = responseMediaType(req) || JSON_TYPE;
  for (const [name, value] of Object.entries(opts.headers ?? {})) res.setHeader(name, value);
  res.vary('Accept');
  res.setHeader('Cache-Control', 'no-store');
  res
    .status(opts.status ?? 400)
    .type(`${type}; charset=utf-8`)
    .send(JSON.stringify({ errors: [{ message, extensions: { code, ...traceIdMember() } }] }));
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
  res.status(refusal.status).type(`${type}; charset=utf-8`).send(JSON.stringify({ errors }));
}
