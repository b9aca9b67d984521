import express, { type NextFunction, type Request, type Response } from 'express';
import { jsonBodyParser } from '../middleware/jsonBody.js';
import { isRecord } from '../pipeline/pipeline.js';
import type { AuthFailure } from '../middleware/authenticate.js';
import { isForeignOrigin } from '../middleware/cookies.js';
import type { ApiErrorCode } from '../problems/catalogue.js';

/**
 * The GraphQL-over-HTTP envelope: the checks that come before GraphQL itself. A request that is not
 * well-formed (bad JSON, missing or mistyped parameters) is answered 400 with `errors` and no `data`
 * whatever the media type (https://graphql.github.io/graphql-over-http/draft/); GraphQL's own
 * request errors (parse, validation, coercion) are a different case, handled in graphql.ts.
 */

const JSON_TYPE = 'application/json';
const GRAPHQL_RESPONSE_TYPE = 'application/graphql-response+json';

type GraphqlMediaType = typeof JSON_TYPE | typeof GRAPHQL_RESPONSE_TYPE;

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

const responseMediaType = (req: Request) =>
  req.headers.accept ? (req.accepts([JSON_TYPE, GRAPHQL_RESPONSE_TYPE]) as GraphqlMediaType | false) : JSON_TYPE;

/**
 * What `req.is('application/json')` answers for the Content-Type nearly every client sends, without parsing it: the
 * bare type on a request that has a body (type-is's hasBody rule).
 */
const isPlainJson = (req: Request, contentType: string) =>
  contentType === JSON_TYPE &&
  (req.headers['transfer-encoding'] !== undefined || !Number.isNaN(Number(req.headers['content-length'] ?? NaN)));

/** Sends `{ errors }` only, 400 unless told otherwise. */
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
    .send(JSON.stringify({ errors: [{ message, extensions: { code } }] }));
}

function parseJsonParam(value: unknown, name: string): { value?: unknown; error?: string } {
  if (value === undefined) return {};
  if (typeof value !== 'string') return { error: `The ${name} parameter may be given only once.` };
  try {
    return { value: JSON.parse(value) };
  } catch {
    return { error: `The ${name} parameter must be URL-encoded JSON.` };
  }
}

/** Checks the parameter map shared by GET and POST; returns the first problem found. */
function checkParams(params: Record<string, unknown>): string | undefined {
  const { query, operationName, variables, extensions } = params;
  // A trusted document may be named by graphql-codegen's documentId instead.
  const persisted =
    (isRecord(extensions) && isRecord(extensions.persistedQuery)) || typeof params.documentId === 'string';
  if (query === undefined && !persisted) return 'The query parameter is required.';
  if (query !== undefined && typeof query !== 'string') return 'The query parameter must be a string.';
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') {
    return 'The operationName parameter must be a string or null.';
  }
  if (variables !== undefined && variables !== null && !isRecord(variables)) {
    return 'The variables parameter must be a map or null.';
  }
  if (extensions !== undefined && extensions !== null && !isRecord(extensions)) {
    return 'The extensions parameter must be a map or null.';
  }
  return undefined;
}

/** Validates method, media types, JSON and parameters before Apollo sees the request. */
export function graphqlEnvelope(opts: { bodyLimit: string }) {
  const parseJson = jsonBodyParser({ limit: opts.bodyLimit, strict: false, type: () => true });

  return [
    (req: Request, res: Response, next: NextFunction) => {
      res.vary('Accept');
      if (req.method !== 'GET' && req.method !== 'POST') {
        return sendGraphqlError(
          req,
          res,
          `${req.method} is not supported here; use GET or POST.`,
          'METHOD_NOT_ALLOWED',
          {
            status: 405,
            headers: { Allow: 'GET, POST' },
          },
        );
      }
      if (responseMediaType(req) === false && !(req.method === 'GET' && req.accepts('html'))) {
        return sendGraphqlError(req, res, `Accept ${JSON_TYPE} or ${GRAPHQL_RESPONSE_TYPE}.`, 'NOT_ACCEPTABLE', {
          status: 406,
        });
      }
      if (req.method === 'GET') return checkGet(req, res, next);
      const contentType = req.headers['content-type'];
      if (!contentType || !(isPlainJson(req, contentType) || req.is(JSON_TYPE))) {
        return sendGraphqlError(
          req,
          res,
          `POST requests must send Content-Type: ${JSON_TYPE}.`,
          'UNSUPPORTED_MEDIA_TYPE',
          {
            status: 415,
            headers: { 'Accept-Post': JSON_TYPE },
          },
        );
      }
      next();
    },
    (req: Request, res: Response, next: NextFunction) => (req.method === 'POST' ? parseJson(req, res, next) : next()),
    (error: { type?: string; status?: number }, req: Request, res: Response, next: NextFunction) => {
      if (error.type === 'entity.too.large') {
        return sendGraphqlError(req, res, `The request body is larger than ${opts.bodyLimit}.`, 'PAYLOAD_TOO_LARGE', {
          status: 413,
        });
      }
      if (error.type === 'entity.parse.failed') {
        return sendGraphqlError(req, res, 'The request body is not valid JSON.', 'BAD_REQUEST');
      }
      // jsonBodyParser refuses any declared charset but UTF-8, before reading the body.
      if (error.type === 'charset.unsupported') {
        return sendGraphqlError(req, res, 'Request bodies must be UTF-8 encoded.', 'UNSUPPORTED_MEDIA_TYPE', {
          status: 415,
        });
      }
      if (error.status && error.status >= 400 && error.status < 500) {
        return sendGraphqlError(req, res, 'The request body could not be read.', 'BAD_REQUEST');
      }
      next(error);
    },
    (req: Request, res: Response, next: NextFunction) => {
      if (req.method !== 'POST') return next();
      if (Array.isArray(req.body)) {
        return sendGraphqlError(
          req,
          res,
          'Batched requests are not supported; send one operation per request.',
          'BAD_REQUEST',
        );
      }
      if (!isRecord(req.body))
        return sendGraphqlError(req, res, 'The request body must be a JSON object.', 'BAD_REQUEST');
      const problem = checkParams(req.body);
      if (problem) return sendGraphqlError(req, res, problem, 'BAD_REQUEST');
      next();
    },
  ];
}

function checkGet(req: Request, res: Response, next: NextFunction) {
  // The Express integration insists on a parsed body, which a GET never has.
  req.body = undefined;
  const q = req.query as Record<string, unknown>;
  // A browser asking for the page gets Apollo's landing page (Sandbox) outside production.
  if (
    q.query === undefined &&
    q.extensions === undefined &&
    q.documentId === undefined &&
    responseMediaType(req) !== GRAPHQL_RESPONSE_TYPE &&
    req.accepts(['json', 'html']) === 'html'
  ) {
    return next();
  }
  if (Array.isArray(q.query) || Array.isArray(q.operationName)) {
    return sendGraphqlError(req, res, 'Each parameter may be given only once.', 'BAD_REQUEST');
  }
  const variables = parseJsonParam(q.variables, 'variables');
  const extensions = parseJsonParam(q.extensions, 'extensions');
  const problem =
    variables.error ??
    extensions.error ??
    checkParams({
      query: q.query,
      documentId: q.documentId,
      operationName: q.operationName,
      variables: variables.value,
      extensions: extensions.value,
    });
  if (problem) return sendGraphqlError(req, res, problem, 'BAD_REQUEST');
  next();
}

/**
 * The second half of cookie CSRF protection: a cookie-bearing request from a page of another origin is refused even
 * when it could pass the preflight rule (a CORS misconfiguration, a same-site sibling). Browsers send Origin with
 * every cross-origin request that could carry an operation.
 */
export function refuseForeignOrigins(trusted: ReadonlySet<string>) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (!req.headers.cookie || !isForeignOrigin(req.headers.origin, trusted)) return next();
    sendGraphqlError(
      req,
      res,
      `Requests that carry a cookie are accepted only from ${[...trusted].join(', ')}.`,
      'FORBIDDEN',
      { status: 403 },
    );
  };
}

/** Refused credentials on a GraphQL transport: a GraphQL error body with the status and Bearer challenge. */
export const graphqlAuthFailure: AuthFailure = (req, res, status, challenge, detail) =>
  sendGraphqlError(req, res, detail, status === 503 ? 'SERVICE_UNAVAILABLE' : 'UNAUTHENTICATED', {
    status,
    headers: { 'WWW-Authenticate': challenge },
  });
