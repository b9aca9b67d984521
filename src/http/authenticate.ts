import type { NextFunction, Request, Response } from 'express';
import { InvalidTokenError, type TokenVerifier } from '../auth/bearer.js';
import { ANONYMOUS, type Principal } from '../domain/policy.js';

declare module 'express-serve-static-core' {
  interface Locals {
    principal: Principal;
  }
}

/** RFC 6750 §3: tell the client which scheme to use and why its token was refused. */
export function bearerChallenge(
  error?: 'invalid_token' | 'invalid_request' | 'insufficient_scope',
  description?: string,
) {
  const params = ['realm="orders-api"'];
  if (error) params.push(`error="${error}"`);
  if (description) params.push(`error_description="${description.replace(/["\\]/g, '')}"`);
  return `Bearer ${params.join(', ')}`;
}

export type AuthFailure = (
  req: Request,
  res: Response,
  status: 400 | 401 | 503,
  challenge: string,
  detail: string,
) => void;

/**
 * Resolves the caller from `Authorization: Bearer`. No credentials means anonymous; credentials
 * that fail verification end the request with 401, never a silent downgrade to anonymous.
 */
export function authenticate(verifier: TokenVerifier, fail: AuthFailure) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const header = req.headers.authorization;
    if (header === undefined) {
      res.locals.principal = ANONYMOUS;
      return next();
    }
    const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
    if (!match) {
      return fail(
        req,
        res,
        401,
        bearerChallenge('invalid_request', 'Use Authorization: Bearer <token>'),
        'The Authorization header must carry a Bearer token.',
      );
    }
    try {
      res.locals.principal = await verifier.verify(match[1]!);
      next();
    } catch (error) {
      if (error instanceof InvalidTokenError) {
        return fail(req, res, 401, bearerChallenge('invalid_token', error.message), error.message);
      }
      req.log?.error({ err: error }, 'access token verification failed');
      return fail(req, res, 503, bearerChallenge(), 'Access tokens cannot be verified right now; retry shortly.');
    }
  };
}
