import express, { type NextFunction, type Request, type Response } from 'express';
import type { TokenVerifier } from '../../auth/bearer.js';
import { DomainError, RETRY_AFTER_SECONDS } from '../../domain/errors.js';
import type { Services } from '../../domain/services.js';
import { authenticate, bearerChallenge } from '../middleware/authenticate.js';
import { CLIENT_ERROR_CODES, clientError } from '../problems/unreadableRequests.js';
import { sendProblem } from '../problems/catalogue.js';
import type { RateBudget } from '../middleware/rateBudget.js';
import { openapiDocument } from './openapi.js';
import { ordersRouter } from './orders.js';
import { chargeRestRequests } from './rateLimit.js';

/** The REST transport's one translator from failures to problem details. */
function problems(error: unknown, req: Request, res: Response, next: NextFunction) {
  if (res.headersSent) return next(error);
  if (error instanceof DomainError) {
    const headers: Record<string, string> = {};
    if (error.code === 'UNAUTHENTICATED') headers['WWW-Authenticate'] = bearerChallenge();
    if (error.code === 'INSUFFICIENT_SCOPE') {
      headers['WWW-Authenticate'] =
        `${bearerChallenge('insufficient_scope', error.message)}, scope="${error.details.scope ?? ''}"`;
    }
    if (error.code === 'IDEMPOTENCY_KEY_IN_USE') headers['Retry-After'] = '1';
    if (error.code === 'SERVICE_UNAVAILABLE') headers['Retry-After'] = String(RETRY_AFTER_SECONDS);
    return sendProblem(req, res, error.code, error.message, {
      headers,
      ...(error.details.invalid ? { invalid: error.details.invalid } : {}),
    });
  }
  const refused = clientError(error, '64 kB');
  if (refused) return sendProblem(req, res, CLIENT_ERROR_CODES[refused.status], refused.detail);
  next(error);
}

/** Resource endpoints: Bearer credentials on every request, no server-side session. */
export function createRestRouter(deps: {
  services: Services;
  verifier: TokenVerifier;
  budget: RateBudget;
}): express.Router {
  const router = express.Router();
  // Free and without RateLimit fields: the document is public and shared caches may serve it to anyone.
  router.get('/openapi.json', (_req, res) => {
    res.set('Cache-Control', 'public, max-age=300').json(openapiDocument);
  });
  router.use(
    authenticate(deps.verifier, (req, res, status, challenge, detail) =>
      sendProblem(req, res, status === 503 ? 'SERVICE_UNAVAILABLE' : 'UNAUTHENTICATED', detail, {
        headers: { 'WWW-Authenticate': challenge },
      }),
    ),
  );
  router.use(chargeRestRequests(deps.budget));
  router.use(ordersRouter(deps.services));
  router.use(problems);
  return router;
}
