import type { Request, Response } from 'express';
import type { Precondition } from '../../domain/etags.js';
import { parseEtagList } from '../middleware/index.js';
import { sendProblem } from '../problems/index.js';

/** The body must have been sent as one of `types`; otherwise 415, naming what is accepted. */
export function requireType(
  req: Request,
  res: Response,
  types: readonly string[],
  acceptHeader: 'Accept-Patch' | 'Accept-Post' | 'Accept',
): boolean {
  if (req.is([...types])) return true;
  sendProblem(req, res, 'UNSUPPORTED_MEDIA_TYPE', `Send the body as ${types.join(' or ')}.`, {
    headers: { [acceptHeader]: types.join(', ') },
  });
  return false;
}

/**
 * Writes to an existing resource must say which version they change (RFC 6585 §3: 428 when not), so that they
 * cannot overwrite a change the client has not seen. Returns undefined after answering.
 */
export function requiredIfMatch(
  req: Request,
  res: Response,
  what: string,
): { precondition?: Precondition } | undefined {
  const header = req.get('If-Match');
  if (header === undefined) {
    sendProblem(req, res, 'PRECONDITION_REQUIRED', `Send If-Match with the ETag of the ${what} as you last read it.`);
    return undefined;
  }
  return optionalIfMatch(req, res, header);
}

export function optionalIfMatch(
  req: Request,
  res: Response,
  header = req.get('If-Match'),
): { precondition?: Precondition } | undefined {
  if (header === undefined) return {};
  const list = parseEtagList(header);
  if (!list) {
    sendProblem(req, res, 'MALFORMED_REQUEST', 'If-Match must be * or a list of quoted entity tags.');
    return undefined;
  }
  return { precondition: { ifMatch: list } };
}

export function methodNotAllowed(allow: string) {
  return (req: Request, res: Response) => {
    if (req.method === 'OPTIONS') {
      res.set('Allow', allow).status(204).end();
      return;
    }
    sendProblem(req, res, 'METHOD_NOT_ALLOWED', `${req.method} is not supported here.`, { headers: { Allow: allow } });
  };
}

/** `limit` as a plain whole number from 1 (Number() would also take "0x10", "1e2" and " 5"); NaN when malformed. */
export function limitParam(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const limit = typeof value === 'string' && /^\d{1,20}$/.test(value) ? Number(value) : NaN;
  return Number.isInteger(limit) && limit >= 1 ? limit : NaN;
}
