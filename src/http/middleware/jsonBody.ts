import { isUtf8 } from 'node:buffer';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { READABLE_CONTENT_CODINGS } from '../problems/index.js';

/** A JSON body the client must fix, in the shape body-parser's own errors have (see problems/unreadableRequests.ts). */
function refused(type: 'entity.parse.failed' | 'charset.unsupported' | 'encoding.unsupported', message: string) {
  return Object.assign(new Error(message), { type, status: type === 'entity.parse.failed' ? 400 : 415 });
}

/** A Content-Encoding this server reads: none, identity, or one of READABLE_CONTENT_CODINGS. */
export const readableCoding = (header: string | undefined) => {
  const coding = header?.trim().toLowerCase();
  return !coding || coding === 'identity' || READABLE_CONTENT_CODINGS.includes(coding);
};

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;

/**
 * express.json, stricter in two ways for every transport that reads JSON bodies (REST, GraphQL over HTTP and SSE):
 * - JSON is UTF-8 (RFC 8259 §8.1): any other declared charset is 415, where body-parser would decode UTF-16 and
 *   UTF-32 and refuse the rest;
 * - an empty body is not JSON: 400, where body-parser would read it as `{}` (an empty merge patch would then change
 *   nothing and answer 200, an empty create would list missing members);
 * - the content codings read are gzip, deflate and br: any other (zstd, which body-parser inflates only on Node
 *   versions that have it) is 415 with Accept-Encoding, before the body is read.
 */
export function jsonBodyParser(opts: {
  limit: string;
  type?: string | readonly string[] | ((req: Request) => boolean);
  strict?: boolean;
  /** Bytes that are not UTF-8 are 415 (SCIM says so), where the decoder would put U+FFFD in their place. */
  utf8Only?: boolean;
}): RequestHandler {
  const parse = express.json({
    limit: opts.limit,
    strict: opts.strict ?? true,
    ...(opts.type === undefined ? {} : { type: opts.type as never }),
    verify: (_req, _res, body) => {
      if (body.length === 0) throw refused('entity.parse.failed', 'empty body');
      if (opts.utf8Only && !isUtf8(body)) throw refused('charset.unsupported', 'the body is not UTF-8');
    },
  });
  return (req: Request, res: Response, next: NextFunction) => {
    // As body-parser decides whether there is a body to read (type-is's hasBody): a declared length, even 0, counts.
    const length = req.headers['content-length'];
    const hasBody = req.headers['transfer-encoding'] !== undefined || (length !== undefined && !isNaN(Number(length)));
    const charset = hasBody ? CHARSET.exec(req.headers['content-type'] ?? '')?.[1]?.toLowerCase() : undefined;
    if (charset !== undefined && charset !== 'utf-8') {
      return next(refused('charset.unsupported', `unsupported charset "${charset}"`));
    }
    if (hasBody && !readableCoding(req.headers['content-encoding'])) {
      return next(refused('encoding.unsupported', 'unsupported content encoding'));
    }
    parse(req, res, next);
  };
}
