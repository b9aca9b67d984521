import type { IncomingMessage, ServerResponse } from 'node:http';
import { PROBLEM_TYPES, problemBody, type ApiErrorCode } from './catalogue.js';

/** The headers every problem the server writes by itself carries (the app's security headers are not on these). */
const PROBLEM_HEADERS = {
  'Content-Type': 'application/problem+json',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
} as const;

/**
 * Problem details written by the HTTP server itself, on a ServerResponse that Express never sees: while the app
 * starts, for a request without Host, while draining, and for a request cut off in the middle of its body.
 */
export function sendEarlyProblem(
  req: IncomingMessage,
  res: ServerResponse,
  code: ApiErrorCode,
  detail: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  const body = JSON.stringify(problemBody(code, detail, req.url ?? '/'));
  res.writeHead(PROBLEM_TYPES[code].status, PROBLEM_TYPES[code].title, {
    ...PROBLEM_HEADERS,
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
  const body = JSON.stringify(problemBody(code, detail, instance));
  const fields = { ...PROBLEM_HEADERS, 'Content-Length': String(Buffer.byteLength(body)), ...headers };
  return [
    `HTTP/1.1 ${status} ${title}`,
    ...Object.entries(fields).map(([name, value]) => `${name}: ${value}`),
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}
