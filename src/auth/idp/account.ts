import { createHmac, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type Provider from 'oidc-provider';
import type { Session } from 'oidc-provider';
import type { Logger } from 'pino';
import { ACR } from '../../domain/policy.js';
import type { Queryable } from '../../store/db.js';
import { credentialsOf, enrolmentCodeIsLive } from '../../store/idpFactors.js';
import { accountPage, notSignedInPage, SCRIPT_PAGE_POLICY } from './factorPages.js';
import { errorPage, PAGE_POLICY } from './pages.js';
import { MAX_RESPONSE_CHARS, PasskeyRefused, type PasskeyService } from './passkeys.js';
import { enrolmentCodeHash, enrolmentCodeRoutes } from './enrolmentCodes.js';
import { confirmEnrolment, hasTotp, newEnrolment } from './totp.js';
import { unreadableForm } from './unreadableForms.js';
import { findUserBySubject } from './users.js';

const SECRET = /^[A-Z2-7]{16,128}$/;

/** STEP_UP_MAX_AGE_S's default, for an app whose step-up is off. */
const FACTOR_CHANGE_MAX_AGE_S = 900;

/** A factor change refused after its form was read: the enrolment code was spent by a request racing this one. */
class EnrolmentRefused extends Error {}

const NO_CODE =
  'Adding your first factor needs the enrolment code your administrator gave you: this one is missing, wrong, expired or already used.';

/**
 * The IdP's account page (`/account`): who is signed in at the IdP, and where second factors are added — an
 * authenticator app (TOTP, shown as a QR code and its secret) and passkeys. Factors change only from a recent
 * sign-in (within `maxAgeSeconds`, NIST SP 800-63B re-authentication): the first one with an enrolment code an
 * administrator issued (enrolmentCodes.ts), any other from a session that used a factor. Forms carry a token bound to
 * the IdP session (its cookie's id, which another site cannot read) and must come from this origin.
 */
export function accountRoutes(opts: {
  provider: Provider;
  db: Queryable;
  passkeys: PasskeyService;
  logger: Logger;
  basePath: string;
  /** The IdP's origin: account forms come from nowhere else. */
  origin: string;
  /** The app's public URL, whose /auth/login signs in (and steps up) at this IdP. */
  publicUrl: string;
  /** Keys the CSRF tokens (the IdP's cookie keys). */
  secret: string;
  /** How recent the sign-in of a session that changes factors must be (STEP_UP_MAX_AGE_S). */
  maxAgeSeconds?: number | undefined;
}): Router {
  const { provider, db, passkeys, logger, basePath } = opts;
  const router = express.Router();
  const codeForm = express.urlencoded({ extended: false, limit: '1kb', parameterLimit: 5 });
  const passkeyForm = express.urlencoded({ extended: false, limit: MAX_RESPONSE_CHARS * 3 + 1024, parameterLimit: 5 });
  const accountPath = `${basePath}/account`;
  const actions = { totp: `${accountPath}/totp`, passkeys: `${accountPath}/passkeys` };
  /** Signing in again: `step-up` asks for the second factor only, `again` for a whole new sign-in (max_age=0). */
  const signInUrl = (how: 'first' | 'step-up' | 'again') => {
    const url = new URL('/auth/login', opts.publicUrl);
    url.searchParams.set('returnTo', accountPath);
    if (how !== 'first') url.searchParams.set('acr_values', ACR.mfa);
    if (how === 'again') url.searchParams.set('max_age', '0');
    return url.href;
  };
  const maxAgeSeconds = opts.maxAgeSeconds ?? FACTOR_CHANGE_MAX_AGE_S;
  const recently = maxAgeSeconds % 60 ? `${maxAgeSeconds} seconds` : `${maxAgeSeconds / 60} minutes`;
  const isRecent = (session: Session) => Math.floor(Date.now() / 1000) - (session.loginTs ?? 0) <= maxAgeSeconds;
  /** What a session may do to this account's factors: nothing (and why), or change them, with a code or without. */
  const allowance = (session: Session, hasFactor: boolean) =>
    !isRecent(session)
      ? ('sign-in-again' as const)
      : !hasFactor
        ? ('with-code' as const)
        : session.acr === ACR.mfa
          ? ('yes' as const)
          : ('verify-first' as const);
  const csrfFor = (session: Session) =>
    createHmac('sha256', opts.secret).update(`account:${session.jti}`).digest('base64url');

  async function sessionOf(req: Request, res: Response): Promise<Session | null> {
    const session = await provider.Session.get(provider.createContext(req, res));
    return session.accountId ? session : null;
  }

  async function render(
    req: Request,
    res: Response,
    session: Session,
    status = 200,
    notice: { message?: string; error?: string } = {},
  ) {
    const subject = session.accountId!;
    const [user, totpEnrolled, keys] = await Promise.all([
      findUserBySubject(db, subject),
      hasTotp(db, subject),
      credentialsOf(db, subject),
    ]);
    const may = allowance(session, totpEnrolled || keys.length > 0);
    const username = user?.username ?? subject;
    res
      .status(status)
      .set({ 'Content-Security-Policy': SCRIPT_PAGE_POLICY, 'Cache-Control': 'no-store' })
      .type('html')
      .send(
        accountPage({
          name: user?.name ?? subject,
          username,
          csrf: csrfFor(session),
          actions,
          assets: `${basePath}/assets`,
          totpEnrolled,
          passkeyCount: keys.length,
          ...(may === 'yes' || may === 'with-code'
            ? {
                enrolment: await newEnrolment(username),
                registration: await passkeys.registrationOptions({ subject, username, name: user?.name ?? subject }),
                codeNeeded: may === 'with-code',
              }
            : may === 'verify-first'
              ? { verifyFirstUrl: signInUrl('step-up') }
              : { signInAgain: { url: signInUrl('again'), within: recently } }),
          ...notice,
        }),
      );
  }

  function refuseWith(res: Response, status: number, message: string, link?: { href: string; text: string }) {
    res
      .status(status)
      .set('Content-Security-Policy', PAGE_POLICY)
      .type('html')
      .send(
        errorPage({ title: 'Not changed', message, link: link ?? { href: accountPath, text: 'Back to your account' } }),
      );
    return null;
  }

  /**
   * The signed-in session a form may change factors for (right origin, right token, a recent sign-in, allowed to
   * change them), and what binds the change: spending the form's enrolment code when it needs one.
   */
  async function formSession(
    req: Request,
    res: Response,
  ): Promise<{ session: Session; bind: () => Promise<void> } | null> {
    const origin = req.headers.origin;
    const body = (req.body ?? {}) as { csrf?: unknown; enrolment_code?: unknown };
    const token = body.csrf;
    const session = await sessionOf(req, res);
    const refuse = (status: number, message: string, link?: { href: string; text: string }) =>
      refuseWith(res, status, message, link);
    if (origin !== undefined && origin !== opts.origin) return refuse(403, 'This form must be sent from this site.');
    if (!session) return refuse(401, 'You are not signed in to the identity provider any more.');
    const expected = Buffer.from(csrfFor(session));
    const given = Buffer.from(typeof token === 'string' ? token : '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return refuse(403, 'This form is out of date or did not come from your account page. Open the page again.');
    }
    const subject = session.accountId!;
    const hasFactor = (await hasTotp(db, subject)) || (await credentialsOf(db, subject)).length > 0;
    const may = allowance(session, hasFactor);
    if (may === 'sign-in-again') {
      return refuse(401, `Changing your factors needs a sign-in within the last ${recently}. Sign in again first.`, {
        href: signInUrl('again'),
        text: 'Sign in again',
      });
    }
    if (may === 'verify-first') return refuse(403, 'Verify with your second factor before you change your factors.');
    if (may === 'yes') return { session, bind: async () => {} };
    const hash = typeof body.enrolment_code === 'string' ? enrolmentCodeHash(body.enrolment_code) : null;
    if (!hash || !(await enrolmentCodeIsLive(db, subject, hash, false))) return refuse(403, NO_CODE);
    const bind = async () => {
      if (!(await enrolmentCodeIsLive(db, subject, hash, true))) throw new EnrolmentRefused(NO_CODE);
    };
    return { session, bind };
  }

  router.get('/account', async (req, res) => {
    const session = await sessionOf(req, res);
    if (!session) {
      res
        .status(401)
        .set('Content-Security-Policy', PAGE_POLICY)
        .type('html')
        .send(notSignedInPage(signInUrl('first')));
      return;
    }
    await render(req, res, session);
  });

  router.post('/account/totp', codeForm, async (req, res) => {
    const allowed = await formSession(req, res);
    if (!allowed) return;
    const { session, bind } = allowed;
    const { secret, code } = (req.body ?? {}) as { secret?: unknown; code?: unknown };
    if (typeof secret !== 'string' || !SECRET.test(secret) || typeof code !== 'string') {
      return render(req, res, session, 400, { error: 'The form was incomplete; scan the new code and try again.' });
    }
    let confirmed: boolean;
    try {
      confirmed = await confirmEnrolment(db, session.accountId!, secret, code.slice(0, 16), bind);
    } catch (error) {
      if (error instanceof EnrolmentRefused) return refuseWith(res, 403, error.message);
      throw error;
    }
    if (!confirmed) {
      return render(req, res, session, 401, {
        error: 'That code does not match the new secret. Scan the new QR code below and enter the code it shows.',
      });
    }
    logger.info({ event: 'idp.totp_enrolled', sub: session.accountId }, 'embedded IdP authenticator app enrolled');
    await render(req, res, session, 200, { message: 'The authenticator app is on.' });
  });

  router.post('/account/passkeys', passkeyForm, async (req, res) => {
    const allowed = await formSession(req, res);
    if (!allowed) return;
    const { session, bind } = allowed;
    const raw = (req.body as { response?: unknown }).response;
    try {
      if (typeof raw !== 'string' || raw === '') {
        throw new PasskeyRefused('The passkey sent no answer (passkeys need JavaScript in the browser).');
      }
      await passkeys.register(session.accountId!, raw, bind);
    } catch (error) {
      if (error instanceof EnrolmentRefused) return refuseWith(res, 403, error.message);
      if (!(error instanceof PasskeyRefused)) throw error;
      logger.info({ event: 'idp.passkey_refused', reason: error.message }, 'embedded IdP passkey registration refused');
      return render(req, res, session, /larger than/.test(error.message) ? 413 : 400, { error: error.message });
    }
    logger.info({ event: 'idp.passkey_registered', sub: session.accountId }, 'embedded IdP passkey registered');
    await render(req, res, session, 200, { message: 'The passkey is registered.' });
  });

  enrolmentCodeRoutes(router, { db, logger });

  router.use('/account', (err: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    const refused = unreadableForm(err);
    if (!refused) logger.error({ err }, 'embedded IdP account page failed');
    res
      .status(refused?.status ?? 500)
      .set('Content-Security-Policy', PAGE_POLICY)
      .type('html')
      .send(
        errorPage({
          title: 'Not changed',
          message: refused?.tooMuch
            ? 'The form sent more than adding a factor ever needs, so it was not read.'
            : refused
              ? 'The form could not be read.'
              : 'Something went wrong; nothing was changed.',
          link: { href: accountPath, text: 'Back to your account' },
        }),
      );
  });

  return router;
}
