import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import helmet from 'helmet';

/**
 * Helmet's headers on every response (nosniff among them), set once for the whole app. The policy only forbids
 * framing: a fuller CSP would have to allow the Sandbox landing page's scripts from Apollo's CDN and the inline
 * scripts of the IdP's auto-submitting forms, and would then protect little.
 *
 * Nothing in this configuration depends on the request, so helmet runs once, at start-up, and each response gets the
 * headers it set then (and loses those it removed) in one step, instead of through helmet's dozen middlewares.
 */
export function securityHeaders() {
  const middleware = helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: helmet.contentSecurityPolicy.dangerouslyDisableDefaultSrc,
        frameAncestors: ["'none'"],
      },
    },
    // For browsers that predate frame-ancestors.
    frameguard: { action: 'deny' },
    // Helmet's no-referrer would make browsers send `Origin: null` on this site's own form posts (Fetch §3.1), and
    // the sign-out and cookie checks would then refuse them as foreign.
    referrerPolicy: { policy: 'same-origin' },
  });
  const set: [string, string][] = [];
  const removed: string[] = [];
  const recorder = {
    setHeader(name: string, value: string | number | readonly string[]) {
      set.push([name, String(value)]);
      return recorder;
    },
    removeHeader(name: string) {
      removed.push(name);
    },
  };
  let called = false;
  middleware({} as IncomingMessage, recorder as unknown as ServerResponse, (error?: unknown) => {
    if (error) throw error;
    called = true;
  });
  if (!called) throw new Error('helmet did not finish synchronously');
  return (_req: Request, res: Response, next: NextFunction) => {
    for (const name of removed) res.removeHeader(name);
    for (const [name, value] of set) res.setHeader(name, value);
    next();
  };
}
