import type { NextFunction, Request, Response } from 'express';
import { sendGraphqlError } from '../problems/index.js';
import { isForeignOrigin } from './cookies.js';

const SIMPLE_METHODS = new Set(['GET', 'HEAD', 'POST']);
const SIMPLE_TYPES = new Set(['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain']);
/**
 * Headers a cross-site page cannot attach without a CORS preflight: Apollo's two, graphql-sse's stream token, and
 * Authorization (which also means the request is not relying on the cookie).
 */
const PREFLIGHTED_HEADERS = ['apollo-require-preflight', 'x-apollo-operation-name', 'x-graphql-event-stream-token'];

/**
 * A request a cross-site form, link or EventSource could send without the browser asking this server first: Apollo
 * Server's csrfPrevention rule (a simple method and content type, none of the headers above with a value).
 */
function isSimpleRequest(req: Request): boolean {
  if (!SIMPLE_METHODS.has(req.method)) return false;
  const contentType = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (contentType && !SIMPLE_TYPES.has(contentType)) return false;
  return !req.headers.authorization && !PREFLIGHTED_HEADERS.some((name) => Boolean(req.headers[name]));
}

function carriesCookie(header: string | undefined, name: string): boolean {
  return Boolean(header?.split(';').some((pair) => pair.trim().startsWith(`${name}=`)));
}

/**
 * Apollo's CSRF rule, applied where it matters: a simple request that carries the session cookie could have been
 * forged by another site, so it is refused. Other cookies (a theme, an analytics id) authenticate nothing and do
 * not count, so public GETs keep working for a browser that holds them. /graphql and /graphql/stream share this.
 */
export function refuseCookieCsrf(sessionCookie: string, exempt: (req: Request) => boolean = () => false) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (!carriesCookie(req.headers.cookie, sessionCookie) || !isSimpleRequest(req) || exempt(req)) return next();
    sendGraphqlError(
      req,
      res,
      'This request carries the session cookie but could be a cross-site request forgery. Send Content-Type: ' +
        'application/json, or an Apollo-Require-Preflight or X-Apollo-Operation-Name header.',
      'BAD_REQUEST',
    );
  };
}

/**
 * Apollo Server's default CSRF prevention, for the one kind of request it still has to stop once cookie CSRF is
 * handled: a GET that sends its document as text, which any page could make a browser send (an <img>, a link).
 * Production answers only those that show a preflight would have been asked for. A GET that names a persisted
 * document (a hash or documentId, `sendsText` false) stays plain: it can only run a document the server already
 * holds, and it is what CDNs cache and mobile apps send.
 */
export function refuseSimpleTextGets(sendsText: (req: Request, res: Response) => boolean) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET' || !isSimpleRequest(req) || !sendsText(req, res)) return next();
    sendGraphqlError(
      req,
      res,
      'This GET sends a query text and could be a cross-site request forgery. Send an Apollo-Require-Preflight: ' +
        'true or X-Apollo-Operation-Name header (or Content-Type: application/json), name a persisted document ' +
        '(extensions.persistedQuery.sha256Hash or documentId) instead of its text, or use POST.',
      'BAD_REQUEST',
    );
  };
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
    );
  };
}
