import type { NextFunction, Request, Response } from 'express';
import { BoundTokenError, InvalidTokenError, type TokenVerifier } from '../../auth/bearer.js';
import { DPOP_ALGORITHMS, InvalidDpopProofError } from '../../auth/dpop.js';
import { DomainError, RETRY_AFTER_SECONDS } from '../../domain/errors.js';
import { ANONYMOUS, type Principal, type User } from '../../domain/policy.js';
import { readCookie } from './cookies.js';

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

/** RFC 9449 §7.1: the DPoP scheme's challenge names the proof algorithms this API accepts. */
export function dpopChallenge(error: 'invalid_token' | 'invalid_dpop_proof', description: string) {
  const why = description.replace(/["\\]/g, '');
  return `DPoP error="${error}", error_description="${why}", algs="${DPOP_ALGORITHMS.join(' ')}"`;
}

export type AuthFailure = (
  req: Request,
  res: Response,
  status: 400 | 401 | 503,
  challenge: string,
  detail: string,
) => void;

export interface AuthenticateOptions {
  /** Browser sessions (GraphQL only; REST stays Bearer-only and omits this). */
  readonly session?: {
    readonly cookieName: string;
    /** The session's user; null when unknown, idle too long, expired or revoked. */
    lookup(id: string): Promise<User | null>;
  };
}

/**
 * Resolves the caller from `Authorization: Bearer` or `Authorization: DPoP` (with its `DPoP` proof), or else from
 * a session cookie when sessions are enabled. No credentials means anonymous; credentials that fail verification
 * end the request with 401, never a silent downgrade to anonymous. An Authorization header wins over a cookie: it
 * is what the caller chose to send for this request.
 */
export function authenticate(verifier: TokenVerifier, fail: AuthFailure, options: AuthenticateOptions = {}) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const header = req.headers.authorization;
    if (header === undefined) {
      const sessionId = options.session && readCookie(req.headers.cookie, options.session.cookieName);
      if (options.session && sessionId) {
        let user: User | null;
        try {
          user = await options.session.lookup(sessionId);
        } catch (error) {
          if (!(error instanceof DomainError && error.code === 'SERVICE_UNAVAILABLE')) throw error;
          return unavailable(req, res, fail, 'Sessions cannot be checked right now; retry shortly.');
        }
        if (!user) {
          return fail(req, res, 401, bearerChallenge(), 'The session has expired or was signed out; sign in again.');
        }
        res.locals.principal = user;
        return next();
      }
      res.locals.principal = ANONYMOUS;
      return next();
    }
    const match = /^(Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
    if (!match) {
      return fail(
        req,
        res,
        401,
        bearerChallenge('invalid_request', 'Use Authorization: Bearer <token> or DPoP <token>'),
        'The Authorization header must carry a Bearer or DPoP token.',
      );
    }
    const dpop = match[1]!.toLowerCase() === 'dpop';
    // headersDistinct copies every header into arrays: only a DPoP presentation needs it.
    const proofs = dpop ? (req.headersDistinct.dpop ?? []) : [];
    // RFC 9449 §4.3 step 1: exactly one proof; two could let a proxy and the client disagree on which counts.
    if (dpop && proofs.length > 1) {
      const detail = 'Send exactly one DPoP proof header.';
      return fail(req, res, 401, dpopChallenge('invalid_dpop_proof', detail), detail);
    }
    try {
      res.locals.principal = await verifier.verify(
        match[2]!,
        dpop ? { scheme: 'dpop', proof: proofs[0], method: req.method, path: req.originalUrl } : { scheme: 'bearer' },
      );
      next();
    } catch (error) {
      if (error instanceof InvalidDpopProofError) {
        return fail(req, res, 401, dpopChallenge('invalid_dpop_proof', error.message), error.message);
      }
      // A DPoP presentation, and a bound token sent as Bearer, are answered in the DPoP scheme (RFC 9449 §7.1).
      if (error instanceof InvalidTokenError && (dpop || error instanceof BoundTokenError)) {
        return fail(req, res, 401, dpopChallenge('invalid_token', error.message), error.message);
      }
      if (error instanceof InvalidTokenError) {
        return fail(req, res, 401, bearerChallenge('invalid_token', error.message), error.message);
      }
      req.log?.error({ err: error }, 'access token verification failed');
      return unavailable(req, res, fail, 'Access tokens cannot be verified right now; retry shortly.');
    }
  };
}

function unavailable(req: Request, res: Response, fail: AuthFailure, detail: string) {
  res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
  fail(req, res, 503, bearerChallenge(), detail);
}
