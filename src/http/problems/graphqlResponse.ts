import express, { type Request, type Response } from 'express';
import { traceIdMember, type ApiErrorCode } from './catalogue.js';

const JSON_TYPE = 'application/json';
const GRAPHQL_RESPONSE_TYPE = 'application/graphql-response+json';

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
