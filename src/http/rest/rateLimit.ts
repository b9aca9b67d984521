import type { NextFunction, Request, Response } from 'express';
import { clientKey, rateLimitHeaders, type RateBudget } from '../middleware/index.js';
import { sendProblem } from '../problems/index.js';

/** Points a REST request spends from the client's budget, by method; docs/rest.md states the same table. */
export const REST_PRICES: Readonly<Record<string, number>> = {
  GET: 1,
  HEAD: 1,
  OPTIONS: 1,
  POST: 10,
  PUT: 10,
  PATCH: 10,
  DELETE: 10,
};
const UNLISTED_METHOD_PRICE = 1;

/**
 * Spends the request's price before any route runs, so a refused write changes nothing. Runs after
 * authentication: a token's subject owns the budget, and anonymous callers share their address's.
 */
export function chargeRestRequests(budget: RateBudget) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const price = REST_PRICES[req.method] ?? UNLISTED_METHOD_PRICE;
    const charge = await budget.charge(clientKey(res.locals.principal, req.ip), price);
    const headers = rateLimitHeaders(charge);
    if (!charge.allowed) {
      return sendProblem(
        req,
        res,
        'RATE_LIMITED',
        `This request costs ${price} points and ${charge.remaining} of ${charge.limit} are left in this ${charge.windowSeconds}-second window; retry in ${charge.resetSeconds} seconds.`,
        { headers },
      );
    }
    res.set(headers);
    next();
  };
}
