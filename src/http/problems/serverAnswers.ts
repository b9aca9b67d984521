import type { IncomingMessage, ServerResponse } from 'node:http';
import { PROBLEM_TYPES, problemBody, problemInstance, traceIdMember, type ApiErrorCode } from './catalogue.js';
import { mediaTypeFor } from './graphqlResponse.js';
import { SCIM_ERROR_SCHEMA, SCIM_MEDIA_TYPE } from './scimErrors.js';

/** The headers every answer the server writes by itself carries (the app's security headers are not on these). */
const COMMON_HEADERS = { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' } as const;

/** SCIM's endpoints, as Express routes them (case-insensitively): their clients read SCIM error messages only. */
const SCIM_PATH = /^\/scim(?:\/|$)/i;

/**
 * GraphQL's endpoints (GraphQL over HTTP and graphql-sse), as Express routes them: case-insensitively, with or
 * without a trailing slash. Their clients read GraphQL's errors, so that is what they get here too.
 */
const GRAPHQL_PATH = /^\/graphql(?:\/stream)?\/?$/i;

/** How GraphQL's transports name a code: a request that cannot be read is BAD_REQUEST there, as everywhere on them. */
const GRAPHQL_CODES: Partial<Record<ApiErrorCode, ApiErrorCode>> = { MALFORMED_REQUEST: 'BAD_REQUEST' };

/**
 * An answer the server writes by itself, in the format the request's path is answered in: the SCIM error message
 * (RFC 7644 §3.12) under /scim, `{ errors }` with `extensions.code` on GraphQL's endpoints (status unchanged),
 * problem details everywhere else. `target` is the request target as sent; `accept` the request's Accept, when its
 * headers were read.
 */
function serverAnswer(code: ApiErrorCode, detail: string, target: string, accept?: string) {
  const path = problemInstance(target);
  if (SCIM_PATH.test(path)) {
    const status = String(PROBLEM_TYPES[code].status);
    return { type: SCIM_MEDIA_TYPE, body: JSON.stringify({ schemas: [SCIM_ERROR_SCHEMA], status, detail }) };
  }
  if (GRAPHQL_PATH.test(path)) {
    const extensions = { code: GRAPHQL_CODES[code] ?? code, ...traceIdMember() };
    return {
      type: `${mediaTypeFor(accept) || 'application/json'}; charset=utf-8`,
      body: JSON.stringify({ errors: [{ message: detail, extensions }] }),
      negotiated: true,
    };
  }
  return { type: 'application/problem+json', body: JSON.stringify(problemBody(code, detail, target)) };
}

/**
 * An error written by the HTTP server itself, on a ServerResponse that Express never sees: while the app starts, for
 * a request without Host, while draining, and for a request cut off in the middle of its body.
 */
export function sendEarlyProblem(
  req: IncomingMessage,
  res: ServerResponse,
  code: ApiErrorCode,
  detail: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  // Express rewrites `url` under a mounted router (`/Users` under /scim/v2, `/` under /graphql); `originalUrl` is
  // what was sent.
  const sent = (req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url ?? '/';
  const { type, body, negotiated } = serverAnswer(code, detail, sent, req.headers.accept);
  res.writeHead(PROBLEM_TYPES[code].status, PROBLEM_TYPES[code].title, {
    ...COMMON_HEADERS,
    'Content-Type': type,
    'Content-Length': Buffer.byteLength(body),
    ...(negotiated ? { Vary: 'Accept' } : {}),
    ...headers,
  });
  res.end(body);
}

/**
 * A whole HTTP/1.1 error response as text, for a socket no ServerResponse owns (a request Node's parser gave up on,
 * a refused connection, a refused upgrade); it closes the connection. `target`: the request's, when it is known.
 */
export function rawProblem(
  code: ApiErrorCode,
  detail: string,
  target: string,
  headers: Readonly<Record<string, string>> = {},
): string {
  const { status, title } = PROBLEM_TYPES[code];
  const { type, body } = serverAnswer(code, detail, target);
  const fields = {
    ...COMMON_HEADERS,
    'Content-Type': type,
    'Content-Length': String(Buffer.byteLength(body)),
    ...headers,
  };
  return [
    `HTTP/1.1 ${status} ${title}`,
    ...Object.entries(fields).map(([name, value]) => `${name}: ${value}`),
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}
