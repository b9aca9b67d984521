import type { Request, Response } from 'express';
import type { Precondition } from '../../domain/etags.js';
import { parseEtagList, readableCoding } from '../middleware/index.js';
import { CODING_REFUSED, sendProblem } from '../problems/index.js';

/**
 * The body must have been sent as one of `types`, in a content coding this server reads; otherwise 415, naming the
 * media types accepted (and, for a coding, the codings read: RFC 9110 §15.5.16).
 */
export function requireType(
  req: Request,
  res: Response,
  types: readonly string[],
  acceptHeader: 'Accept-Patch' | 'Accept-Post' | 'Accept',
): boolean {
  const accepted = { [acceptHeader]: types.join(', ') };
  if (!req.is([...types])) {
    sendProblem(req, res, 'UNSUPPORTED_MEDIA_TYPE', `Send the body as ${types.join(' or ')}.`, { headers: accepted });
    return false;
  }
  if (!readableCoding(req.headers['content-encoding'])) {
    sendProblem(req, res, 'UNSUPPORTED_MEDIA_TYPE', CODING_REFUSED.detail, {
      headers: { ...accepted, ...CODING_REFUSED.headers },
    });
    return false;
  }
  return true;
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

/**
 * The request's conditions on the resource: If-Match, and If-None-Match, which a server must evaluate before any
 * method (RFC 9110 §13.1.2) — on a write to a resource that exists, `*` or its current tag fails with 412.
 */
export function optionalIfMatch(
  req: Request,
  res: Response,
  header = req.get('If-Match'),
): { precondition?: Precondition } | undefined {
  const ifMatch = header === undefined ? undefined : parseEtagList(header);
  if (ifMatch === null) {
    sendProblem(req, res, 'MALFORMED_REQUEST', 'If-Match must be * or a list of quoted entity tags.');
    return undefined;
  }
  const noneHeader = req.get('If-None-Match');
  const ifNoneMatch = noneHeader === undefined ? undefined : parseEtagList(noneHeader);
  if (ifNoneMatch === null) {
    sendProblem(req, res, 'MALFORMED_REQUEST', 'If-None-Match must be * or a list of quoted entity tags.');
    return undefined;
  }
  if (ifMatch === undefined && ifNoneMatch === undefined) return {};
  return {
    precondition: {
      ...(ifMatch === undefined ? {} : { ifMatch }),
      ...(ifNoneMatch === undefined ? {} : { ifNoneMatch }),
    },
  };
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
