import type { NextFunction, Request, Response } from 'express';
import { BEARER, type Authentication, type Credential } from '../../auth/credentials.js';
import { ANONYMOUS, type Principal } from '../../domain/policy.js';
import {
  bearerChallenge,
  dpopChallenge,
  isUnavailable,
  RETRY_LATER,
  sendGraphqlError,
  sendProblem,
} from '../problems/index.js';
import { readCookie } from './cookies.js';

declare module 'express-serve-static-core' {
  interface Locals {
    principal: Principal;
  }
}

/** How a transport refuses credentials: its body format, with this status and WWW-Authenticate challenge. */
export type AuthFailure = (
  req: Request,
  res: Response,
  status: 400 | 401 | 503,
  challenge: string,
  detail: string,
) => void;

/** Refused credentials on a GraphQL transport: a GraphQL error body with the status and the challenge. */
export const graphqlAuthFailure: AuthFailure = (req, res, status, challenge, detail) =>
  sendGraphqlError(req, res, detail, status === 503 ? 'SERVICE_UNAVAILABLE' : 'UNAUTHENTICATED', {
    'WWW-Authenticate': challenge,
  });

/** Refused credentials on REST: problem details with the status and the challenge. */
export const problemAuthFailure: AuthFailure = (req, res, status, challenge, detail) =>
  sendProblem(req, res, status === 503 ? 'SERVICE_UNAVAILABLE' : 'UNAUTHENTICATED', detail, {
    headers: { 'WWW-Authenticate': challenge },
  });

const DEACTIVATED_DETAIL = "The account has been deactivated at the organisation's directory.";

const CREDENTIAL = /^(Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * Resolves the caller (the one authentication, auth/credentials.ts) from `Authorization: Bearer` or
 * `Authorization: DPoP` (with its `DPoP` proof), or else from a session cookie when sessions authenticate here. No
 * credentials means anonymous; credentials that fail verification end the request with 401, never a silent
 * downgrade to anonymous. An Authorization header wins over a cookie: it is what the caller chose to send for this
 * request.
 */
export function authenticate(auth: Authentication, fail: AuthFailure) {
  const { session } = auth;
  return async (req: Request, res: Response, next: NextFunction) => {
    const header = req.headers.authorization;
    let credential: Credential;
    if (header === undefined) {
      const sessionId = session && readCookie(req.headers.cookie, session.cookieName);
      if (!sessionId) {
        res.locals.principal = ANONYMOUS;
        return next();
      }
      credential = { kind: 'session', id: sessionId };
    } else {
      const match = CREDENTIAL.exec(header);
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
      credential = {
        kind: 'token',
        token: match[2]!,
        presentation: dpop ? { scheme: 'dpop', proof: proofs[0], method: req.method, path: req.originalUrl } : BEARER,
      };
    }
    try {
      res.locals.principal = await auth.callerOf(credential);
    } catch (error) {
      return refuse(req, res, fail, credential, auth.refusalOf(error));
    }
    next();
  };
}

function refuse(
  req: Request,
  res: Response,
  fail: AuthFailure,
  credential: Credential,
  refusal: ReturnType<Authentication['refusalOf']>,
) {
  switch (refusal.reason) {
    case 'session_ended':
      return fail(req, res, 401, bearerChallenge(), 'The session has expired or was signed out; sign in again.');
    case 'invalid_dpop_proof':
      return fail(req, res, 401, dpopChallenge('invalid_dpop_proof', refusal.message), refusal.message);
    // A DPoP presentation, and a bound token sent as Bearer, are answered in the DPoP scheme (RFC 9449 §7.1).
    case 'bound_token':
      return fail(req, res, 401, dpopChallenge('invalid_token', refusal.message), refusal.message);
    case 'invalid_token':
    case 'deactivated': {
      const dpop = credential.kind === 'token' && credential.presentation.scheme === 'dpop';
      const challenge = dpop ? dpopChallenge : bearerChallenge;
      const detail = refusal.reason === 'deactivated' ? DEACTIVATED_DETAIL : refusal.message;
      return fail(req, res, 401, challenge('invalid_token', refusal.message), detail);
    }
    case 'unverifiable':
      if (credential.kind === 'session') {
        if (!isUnavailable(refusal.error)) throw refusal.error;
        return unavailable(req, res, fail, 'Sessions cannot be checked right now; retry shortly.');
      }
      req.log?.error({ err: refusal.error }, 'access token verification failed');
      return unavailable(req, res, fail, 'Access tokens cannot be verified right now; retry shortly.');
  }
}

function unavailable(req: Request, res: Response, fail: AuthFailure, detail: string) {
  res.set(RETRY_LATER);
  fail(req, res, 503, bearerChallenge(), detail);
}
