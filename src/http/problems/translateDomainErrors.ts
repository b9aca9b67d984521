import type { NextFunction, Request, Response } from 'express';
import { DomainError } from '../../domain/errors.js';
import { bearerChallenge, stepUpChallenge } from './challenges.js';
import { sendProblem } from './problemDetails.js';
import { RETRY_LATER } from './unavailable.js';
import { sendUnreadableProblem } from './unreadableRequests.js';

/** A domain error as problem details: its code's type and status, and the headers that code calls for. */
export function sendDomainProblem(req: Request, res: Response, error: DomainError): void {
  const headers: Record<string, string> = {};
  if (error.code === 'UNAUTHENTICATED') headers['WWW-Authenticate'] = bearerChallenge();
  if (error.code === 'INSUFFICIENT_SCOPE') {
    headers['WWW-Authenticate'] =
      `${bearerChallenge('insufficient_scope', error.message)}, scope="${error.details.scope ?? ''}"`;
  }
  const { stepUp } = error.details;
  if (error.code === 'INSUFFICIENT_USER_AUTHENTICATION' && stepUp) {
    headers['WWW-Authenticate'] = stepUpChallenge(error.message, stepUp);
  }
  if (error.code === 'IDEMPOTENCY_KEY_IN_USE') headers['Retry-After'] = '1';
  if (error.code === 'SERVICE_UNAVAILABLE') Object.assign(headers, RETRY_LATER);
  sendProblem(req, res, error.code, error.message, {
    headers,
    ...(error.details.invalid ? { invalid: error.details.invalid } : {}),
    ...(stepUp ? { members: { acrValues: stepUp.acrValues, maxAge: stepUp.maxAge } } : {}),
  });
}

/**
 * The REST transport's one translator from failures to problem details: domain errors by their code, requests
 * that could not be read by what went wrong; anything else goes on to the last-resort handler.
 */
export function restProblems(bodyLimit: string) {
  return (error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    if (error instanceof DomainError) return sendDomainProblem(req, res, error);
    if (!sendUnreadableProblem(req, res, error, bodyLimit)) next(error);
  };
}
