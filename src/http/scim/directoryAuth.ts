import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { BEARER, type Authentication } from '../../auth/credentials.js';
import { ANONYMOUS, type Principal } from '../../domain/policy.js';
import { clientKey, rateLimitHeaders, type RateBudget } from '../middleware/index.js';
import { bearerChallenge, ScimError, RETRY_LATER } from '../problems/index.js';

/**
 * Points a failed attempt spends from its client address's SCIM budget (RATE_LIMIT_POINTS per RATE_LIMIT_WINDOW_S,
 * 5000 per hour by default: 50 failures; the whole budget when it is smaller), a bucket apart from the address's
 * budget for everything else. Successful requests spend nothing: a directory's first sync writes thousands.
 */
export const FAILED_ATTEMPT_PRICE = 100;

const BEARER_HEADER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Who may call /scim/v2: the directory, by `Authorization: Bearer` with the shared secret SCIM_TOKEN (compared in
 * constant time, as digests of equal length) or with an access token from the issuer that carries SCIM_SCOPE. The
 * directory's credential always passes; a failed attempt spends FAILED_ATTEMPT_PRICE from the address's SCIM budget
 * (a valid token without the scope from its owner's), and once that cannot pay for another failure every failure
 * there is 429, so a guesser is stopped at the budget while the directory goes on. Guessing the credential itself is
 * out of reach: SCIM_TOKEN has 32 characters or more, access tokens are signed.
 */
export function directoryAuth(deps: {
  token?: string;
  scope?: string;
  /** Access tokens only, checked by the one authentication. */
  auth: Authentication;
  budget: RateBudget;
}) {
  const secret = deps.token === undefined ? undefined : digest(deps.token);

  /**
   * Whether the presented credential is the directory's, or else whose valid token it is (without the scope); throws
   * when it cannot be checked right now.
   */
  async function isDirectory(presented: string): Promise<'yes' | 'no' | { wrongScope: Principal }> {
    if (secret && timingSafeEqual(digest(presented), secret)) return 'yes';
    if (deps.scope === undefined) return 'no';
    let caller;
    try {
      caller = await deps.auth.callerOf({ kind: 'token', token: presented, presentation: BEARER });
    } catch (error) {
      const refusal = deps.auth.refusalOf(error);
      if (refusal.reason === 'unverifiable')
        throw new ScimError('unavailable', 'Access tokens cannot be verified right now.', RETRY_LATER);
      return 'no';
    }
    return caller.scopes.has(deps.scope) ? 'yes' : { wrongScope: caller };
  }

  return async (req: Request, _res: Response, next: NextFunction) => {
    // The credential is checked before any budget, so that the directory's own is never refused for what others
    // sent from its address (a NAT, a proxy, an IdP's shared pool).
    const presented = BEARER_HEADER.exec(req.get('authorization') ?? '')?.[1];
    const verdict = presented === undefined ? 'no' : await isDirectory(presented);
    if (verdict === 'yes') return next();
    // Failures spend a bucket of their own: anonymous traffic from the directory's address (sign-in starts, public
    // reads) must not lock the directory out, nor can SCIM failures spend theirs. A person's valid token without the
    // scope spends that person's, not the address's.
    const caller = verdict === 'no' ? ANONYMOUS : verdict.wrongScope;
    const key = `scim-auth:${clientKey(caller, req.ip)}`;
    const left = await deps.budget.charge(key, 0);
    // A budget smaller than one failure's price still allows one failure per window.
    const price = Math.min(FAILED_ATTEMPT_PRICE, left.limit);
    const charge = left.remaining < price ? { ...left, allowed: false } : await deps.budget.charge(key, price);
    if (!charge.allowed) {
      throw new ScimError(
        'rateLimited',
        `Too many failed attempts; retry in ${charge.resetSeconds} seconds.`,
        rateLimitHeaders(charge),
      );
    }
    if (verdict !== 'no') {
      throw new ScimError('forbidden', `The access token lacks the ${deps.scope} scope.`, {
        'WWW-Authenticate': bearerChallenge('insufficient_scope', `The ${deps.scope} scope is required`),
      });
    }
    throw new ScimError(
      'unauthorized',
      presented === undefined
        ? "Send the directory's credential as Authorization: Bearer <token>."
        : "The bearer token is not the directory's.",
      {
        'WWW-Authenticate':
          presented === undefined
            ? bearerChallenge()
            : bearerChallenge('invalid_token', 'The token is not accepted here'),
      },
    );
  };
}
