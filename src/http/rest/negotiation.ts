import type { NextFunction, Request, Response } from 'express';
import { sendProblem } from '../problems/index.js';

/** What /v1 sends: representations as JSON, failures as problem details. */
const MEDIA_TYPES = ['application/json', 'application/problem+json'];

/** The methods whose answer is a representation (DELETE answers 204, OPTIONS the Allow header). */
const REPRESENTING = new Set(['GET', 'HEAD', 'POST', 'PATCH', 'PUT']);

/**
 * RFC 9110 §12.5.1 and §15.5.7: a request whose Accept allows none of the media types this API sends is answered
 * 406, in problem details all the same (RFC 9457 §3), rather than with a JSON body it said it cannot read. No
 * Accept, or one that allows any type, accepts JSON.
 */
export function requireAcceptableJson(req: Request, res: Response, next: NextFunction): void {
  if (!REPRESENTING.has(req.method) || req.accepts(MEDIA_TYPES)) return next();
  sendProblem(req, res, 'NOT_ACCEPTABLE', `Accept ${MEDIA_TYPES.join(' or ')}: this API sends nothing else.`);
}
