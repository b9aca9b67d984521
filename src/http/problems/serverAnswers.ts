import type { IncomingMessage, ServerResponse } from 'node:http';
import { PROBLEM_TYPES, problemBody, problemInstance, type ApiErrorCode } from './catalogue.js';
import { SCIM_ERROR_SCHEMA, SCIM_MEDIA_TYPE } from './scimErrors.js';

/** The headers every answer the server writes by itself carries (the app's security headers are not on these). */
const COMMON_HEADERS = { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' } as const;

/** SCIM's endpoints, as Express routes them (case-insensitively): their clients read SCIM error messages only. */
const SCIM_PATH = /^\/scim(?:\/|$)/i;

/**
 * An answer the server writes by itself, in the format the request's path is answered in: the SCIM error message
 * (RFC 7644 §3.12) under /scim, problem details everywhere else. `target` is the request target as sent.
 */
function serverAnswer(code: ApiErrorCode, detail: string, target: string) {
  if (!SCIM_PATH.test(problemInstance(target))) {
    return { type: 'application/problem+json', body: JSON.stringify(problemBody(code, detail, target)) };
  }
  const status = String(PROBLEM_TYPES[code].status);
  return { type: SCIM_MEDIA_TYPE, body: JSON.stringify({ schemas: [SCIM_ERROR_SCHEMA], status, detail }) };
}

/**
 * Problem details (a SCIM error under /scim) written by the HTTP server itself, on a ServerResponse that Express never sees: while the app
 * starts, for a request without Host, while draining, and for a request cut off in the middle of its body.
 */
export function sendEarlyProblem(
  req: IncomingMessage,
  res: ServerResponse,
  code: ApiErrorCode,
  detail: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  // Express rewrites `url` under a mounted router (`/Users` under /scim/v2); `originalUrl` is what was sent.
  const sent = (req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url ?? '/';
  const { type, body } = serverAnswer(code, detail, sent);
  res.writeHead(PROBLEM_TYPES[code].status, PROBLEM_TYPES[code].title, {
    ...COMMON_HEADERS,
    'Content-Type': type,
    'Content-Length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

/**
 * A whole HTTP/1.1 problem-details response as text, for a socket no ServerResponse owns (a request Node's parser
 * gave up on, a refused connection, a refused upgrade); it closes the connection.
 */
export function rawProblem(
  code: ApiErrorCode,
  detail: string,
  instance: string,
  headers: Readonly<Record<string, string>> = {},
): string {
  const { status, title } = PROBLEM_TYPES[code];
  const { type, body } = serverAnswer(code, detail, instance);
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
