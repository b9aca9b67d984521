import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { BEARER, type Authentication } from '../../auth/credentials.js';
import { ANONYMOUS } from '../../domain/policy.js';
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
 * constant time, as digests of equal length) or with an access token from the issuer that carries SCIM_SCOPE. A
 * failed attempt spends FAILED_ATTEMPT_PRICE from the address's rate budget, and an address that cannot pay for
 * another failure is refused (429) before its credential is even compared, so guessing stops at the budget.
 */
export function directoryAuth(deps: {
  token?: string;
  scope?: string;
  /** Access tokens only, checked by the one authentication. */
  auth: Authentication;
  budget: RateBudget;
}) {
  const secret = deps.token === undefined ? undefined : digest(deps.token);

  /** Whether the presented credential is the directory's; throws when it cannot be checked right now. */
  async function isDirectory(presented: string): Promise<'yes' | 'no' | 'wrong_scope'> {
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
    return caller.scopes.has(deps.scope) ? 'yes' : 'wrong_scope';
  }

  return async (req: Request, _res: Response, next: NextFunction) => {
    // A bucket of its own, spent by failed SCIM authentications only: anonymous traffic from the directory's address
    // (sign-in starts, public reads) must not lock the directory out, nor can SCIM failures spend theirs.
    const key = `scim-auth:${clientKey(ANONYMOUS, req.ip)}`;
    const left = await deps.budget.charge(key, 0);
    // A budget smaller than one failure's price still allows one failure per window.
    const price = Math.min(FAILED_ATTEMPT_PRICE, left.limit);
    if (left.remaining < price) {
      const refused = { ...left, allowed: false };
      throw new ScimError(
        'rateLimited',
        `Too many failed attempts from this address; retry in ${left.resetSeconds} seconds.`,
        rateLimitHeaders(refused),
      );
    }
    const presented = BEARER_HEADER.exec(req.get('authorization') ?? '')?.[1];
    const verdict = presented === undefined ? 'no' : await isDirectory(presented);
    if (verdict === 'yes') return next();
    const charge = await deps.budget.charge(key, price);
    if (!charge.allowed) {
      throw new ScimError(
        'rateLimited',
        `Too many failed attempts from this address; retry in ${charge.resetSeconds} seconds.`,
        rateLimitHeaders(charge),
      );
    }
    if (verdict === 'wrong_scope') {
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
