import type { NextFunction, Request, Response } from 'express';
import { jsonBodyParser } from '../middleware/index.js';
import { NO_PARAMS, paramsOfBody, paramsOfQuery, type GraphqlParams } from '../pipeline/index.js';
import {
  GRAPHQL_RESPONSE_TYPE,
  JSON_TYPE,
  responseMediaType,
  sendGraphqlError,
  unreadableRequest,
} from '../problems/index.js';

declare module 'express-serve-static-core' {
  interface Locals {
    /** The request's GraphQL parameters, parsed once, by the envelope: every later step reads them from here. */
    graphqlParams: GraphqlParams;
  }
}

/**
 * The GraphQL-over-HTTP envelope: the checks that come before GraphQL itself. A request that is not
 * well-formed (bad JSON, missing or mistyped parameters) is answered 400 with `errors` and no `data`
 * whatever the media type (https://graphql.github.io/graphql-over-http/draft/); GraphQL's own
 * request errors (parse, validation, coercion) are a different case, handled by the plugin (plugin.ts).
 */

/**
 * What `req.is('application/json')` answers for the Content-Type nearly every client sends, without parsing it: the
 * bare type on a request that has a body (type-is's hasBody rule).
 */
const isPlainJson = (req: Request, contentType: string) =>
  contentType === JSON_TYPE &&
  (req.headers['transfer-encoding'] !== undefined || !Number.isNaN(Number(req.headers['content-length'] ?? NaN)));

/**
 * Validates method, media types, JSON and parameters before Apollo sees the request. `landingPage`: a browser's GET
 * of the bare endpoint is Apollo's to answer with its landing page (outside production); without one it is 406.
 */
export function graphqlEnvelope(opts: { bodyLimit: string; landingPage: boolean }) {
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
            Allow: 'GET, POST',
          },
        );
      }
      if (responseMediaType(req) === false && !(opts.landingPage && req.method === 'GET' && req.accepts('html'))) {
        return sendGraphqlError(req, res, `Accept ${JSON_TYPE} or ${GRAPHQL_RESPONSE_TYPE}.`, 'NOT_ACCEPTABLE');
      }
      if (req.method === 'GET') return checkGet(req, res, next, opts.landingPage);
      const contentType = req.headers['content-type'];
      if (!contentType || !(isPlainJson(req, contentType) || req.is(JSON_TYPE))) {
        return sendGraphqlError(
          req,
          res,
          `POST requests must send Content-Type: ${JSON_TYPE}.`,
          'UNSUPPORTED_MEDIA_TYPE',
          {
            'Accept-Post': JSON_TYPE,
          },
        );
      }
      next();
    },
    (req: Request, res: Response, next: NextFunction) => (req.method === 'POST' ? parseJson(req, res, next) : next()),
    (error: { type?: string; status?: number }, req: Request, res: Response, next: NextFunction) => {
      // Already answered: a body the server cut off (408) has nothing more to say.
      if (res.headersSent) return next(error);
      if (error.type === 'entity.too.large') {
        return sendGraphqlError(req, res, `The request body is larger than ${opts.bodyLimit}.`, 'PAYLOAD_TOO_LARGE');
      }
      if (error.type === 'entity.parse.failed') {
        return sendGraphqlError(req, res, 'The request body is not valid JSON.', 'BAD_REQUEST');
      }
      // jsonBodyParser refuses any declared charset but UTF-8, before reading the body.
      if (error.type === 'charset.unsupported') {
        return sendGraphqlError(req, res, 'Request bodies must be UTF-8 encoded.', 'UNSUPPORTED_MEDIA_TYPE');
      }
      // A content coding not read here (zstd): 415 naming those that are (RFC 9110 §15.5.16).
      if (error.type === 'encoding.unsupported') {
        const refused = unreadableRequest(error, opts.bodyLimit)!;
        return sendGraphqlError(req, res, refused.detail, 'UNSUPPORTED_MEDIA_TYPE', refused.headers);
      }
      if (error.status && error.status >= 400 && error.status < 500) {
        return sendGraphqlError(req, res, 'The request body could not be read.', 'BAD_REQUEST');
      }
      next(error);
    },
    (req: Request, res: Response, next: NextFunction) => {
      if (req.method !== 'POST') return next();
      const params = paramsOfBody(req.body);
      if (typeof params === 'string') return sendGraphqlError(req, res, params, 'BAD_REQUEST');
      res.locals.graphqlParams = params;
      next();
    },
  ];
}

/**
 * A browser opening /graphql: a GET that names no document and no extensions and prefers HTML. It gets the landing
 * page (Sandbox) outside production and a 400 in it; nothing runs either way, so nothing can be forged.
 */
export function isLandingPageRequest(req: Request): boolean {
  return req.method === 'GET' && asksForLandingPage(req, req.query as Record<string, unknown>);
}

function asksForLandingPage(req: Request, q: Record<string, unknown>): boolean {
  return (
    q.query === undefined &&
    q.extensions === undefined &&
    q.documentId === undefined &&
    responseMediaType(req) !== GRAPHQL_RESPONSE_TYPE &&
    req.accepts(['json', 'html']) === 'html'
  );
}

function checkGet(req: Request, res: Response, next: NextFunction, landingPage: boolean) {
  // The Express integration insists on a parsed body, which a GET never has.
  req.body = undefined;
  // Express parses the query string again on every read of req.query: this is the one read.
  const q = req.query as Record<string, unknown>;
  // A browser asking for the page gets Apollo's landing page (Sandbox) outside production.
  if (landingPage && asksForLandingPage(req, q)) {
    res.locals.graphqlParams = NO_PARAMS;
    return next();
  }
  const params = paramsOfQuery(q);
  if (typeof params === 'string') return sendGraphqlError(req, res, params, 'BAD_REQUEST');
  res.locals.graphqlParams = params;
  next();
}
