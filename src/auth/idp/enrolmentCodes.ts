import { createHash, randomInt, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { Logger } from 'pino';
import type { Queryable } from '../../store/db.js';
import { saveEnrolmentCode } from '../../store/idpFactors.js';
import { DIRECTORY_CLIENT_ID, DIRECTORY_CLIENT_SECRET } from './clients.js';
import { unreadableForm } from './unreadableForms.js';
import { findUserByUsername } from './users.js';

/**
 * How a person's first second factor is bound: with a one-time enrolment code that an administrator (here, whoever
 * holds the `directory` client's credentials) issues for that person and hands over out of band. A password alone
 * never binds a factor, so a stolen password cannot turn itself into a second factor (docs/auth.md).
 */

/** Long enough to be handed over on paper or by phone the next working day; a new code replaces the last. */
export const ENROLMENT_CODE_TTL_SECONDS = 24 * 60 * 60;
const ALPHABET = 'ABCDEFGHIJKLMNPQRSTUVWXYZ23456789';
/** 16 characters of 33: about 80 bits, beyond guessing through any number of requests. */
const CODE_LENGTH = 16;

/** Four groups of four, as people read them aloud. */
function newCode(): string {
  const chars = Array.from({ length: CODE_LENGTH }, () => ALPHABET[randomInt(ALPHABET.length)]!).join('');
  return chars.match(/.{4}/g)!.join('-');
}

/** What is stored and compared: a hash of the code as typed, with case, spaces and hyphens ignored. */
export function enrolmentCodeHash(typed: string): string | null {
  const code = typed.toUpperCase().replace(/[\s-]/g, '');
  if (code.length !== CODE_LENGTH || [...code].some((c) => !ALPHABET.includes(c))) return null;
  return createHash('sha256').update(code).digest('base64url');
}

const sha256 = (value: string) => createHash('sha256').update(value).digest();

/** RFC 6749 §2.3.1 client_secret_basic: the directory client's id and secret, each form-urlencoded. */
function isDirectory(header: string | undefined): boolean {
  const basic = /^Basic ([A-Za-z0-9+/]+=*)$/i.exec(header ?? '')?.[1];
  if (!basic) return false;
  const decoded = Buffer.from(basic, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return false;
  let id: string;
  let secret: string;
  try {
    id = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
    secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '));
  } catch {
    return false;
  }
  return id === DIRECTORY_CLIENT_ID && timingSafeEqual(sha256(secret), sha256(DIRECTORY_CLIENT_SECRET));
}

/**
 * `POST /enrolment-codes` (form field `username`, client_secret_basic of the directory client): a new code for that
 * person, 201 `{ username, code, expiresAt }`. Errors are answered as the IdP's token endpoint answers them.
 */
export function enrolmentCodeRoutes(router: Router, opts: { db: Queryable; logger: Logger }): void {
  const form = express.urlencoded({ extended: false, limit: '1kb', parameterLimit: 2 });
  const refuse = (res: Response, status: number, error: string, description: string) =>
    res.status(status).set('Cache-Control', 'no-store').json({ error, error_description: description });

  router.post('/enrolment-codes', form, async (req, res) => {
    if (!isDirectory(req.headers.authorization)) {
      res.set('WWW-Authenticate', 'Basic realm="orders-idp"');
      return refuse(res, 401, 'invalid_client', `authenticate as the ${DIRECTORY_CLIENT_ID} client (HTTP Basic)`);
    }
    const username = (req.body as { username?: unknown } | undefined)?.username;
    if (typeof username !== 'string' || username.trim() === '' || username.length > 256) {
      return refuse(res, 400, 'invalid_request', 'username is required: the user name the code is for');
    }
    const user = await findUserByUsername(opts.db, username);
    if (!user) return refuse(res, 404, 'unknown_user', 'no user has this user name');
    const code = newCode();
    const expiresAt = await saveEnrolmentCode(
      opts.db,
      user.subject,
      enrolmentCodeHash(code)!,
      ENROLMENT_CODE_TTL_SECONDS,
    );
    opts.logger.info({ event: 'idp.enrolment_code_issued', sub: user.subject }, 'embedded IdP enrolment code issued');
    res
      .status(201)
      .set('Cache-Control', 'no-store')
      .json({ username: user.username, code, expiresAt: expiresAt.toISOString() });
  });

  router.all('/enrolment-codes', (_req, res) => {
    res.set('Allow', 'POST');
    refuse(res, 405, 'invalid_request', 'enrolment codes are issued with POST');
  });

  router.use('/enrolment-codes', (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    const refused = unreadableForm(err);
    if (!refused || res.headersSent) return next(err);
    refuse(
      res,
      refused.status,
      'invalid_request',
      refused.tooMuch ? 'the form is larger than one username' : 'the form could not be read',
    );
  });
}
