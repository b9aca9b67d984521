import type { NextFunction, Request, Response } from 'express';
import { DomainError } from '../../domain/errors.js';
import { sendProblem } from './problemDetails.js';
import { sendDomainProblem } from './translateDomainErrors.js';
import { isUnavailable } from './unavailable.js';
import { sendUnreadableProblem, unreadableRequest } from './unreadableRequests.js';

/** After every route: nothing is served here. */
export function routeNotFound(req: Request, res: Response): void {
  sendProblem(req, res, 'ROUTE_NOT_FOUND', `Nothing is served at ${req.path}.`);
}

/**
 * The app's last error handler, for failures no transport answered: a dependency that is down is 503 (routes outside
 * /v1 and /graphql, such as sign-in and readiness, meet a database outage here), an unreadable request is the
 * client's, and anything else is a 500 that names the request id and is logged.
 */
export function lastResort(error: unknown, req: Request, res: Response, next: NextFunction): void {
  // A body cut short after the server had answered it (408 for a body that stalled): nothing is left to say.
  if (res.writableEnded && unreadableRequest(error, 'the limit')) return;
  if (res.headersSent) return next(error);
  if (error instanceof DomainError && isUnavailable(error)) return sendDomainProblem(req, res, error);
  if (sendUnreadableProblem(req, res, error, 'the limit')) return;
  req.log.error({ err: error }, 'unhandled error');
  sendProblem(req, res, 'INTERNAL_SERVER_ERROR', `Something went wrong; quote request id ${String(req.id)}.`);
}
