import express, { type NextFunction, type Request, type Response } from 'express';
import { IssuerUnavailable, LoginRejected, type BrowserLogin } from '../../auth/browserLogin.js';
import { errorPage } from '../../auth/idp/pages.js';
import {
  ABSOLUTE_TIMEOUT_SECONDS,
  LOGIN_ATTEMPT_SECONDS,
  csrfTokenFor,
  isCsrfTokenFor,
  type SessionStore,
} from '../../auth/sessions.js';
import type { Config } from '../../config/index.js';
import { ANONYMOUS, parseAcrValues } from '../../domain/policy.js';
import {
  authCookies,
  clientKey,
  isForeignOrigin,
  rateLimitHeaders,
  readCookie,
  serializeCookie,
  trustedOrigins,
  type Charge,
  type RateBudget,
} from '../middleware/index.js';
import {
  bearerChallenge,
  isUnavailable,
  RETRY_LATER,
  sendProblem,
  UNAVAILABLE_STATUS,
  unreadableRequest,
} from '../problems/index.js';

const SIGN_IN_AGAIN = { href: '/auth/login', text: 'Sign in again' };
/** Points a sign-in start spends from its address's rate budget: it stores a row, so it is priced as a REST write. */
export const SIGN_IN_START_PRICE = 10;
const HOME = { href: '/', text: 'Go to the home page' };
/** The sign-out form: one hidden field. */
const logoutForm = express.urlencoded({ extended: false, limit: '1kb', parameterLimit: 5 });

/**
 * `returnTo` must be a path on this origin. It is resolved against PUBLIC_URL and only the normalised result is
 * used, never the raw string: dot segments can turn `/.//host` into `//host`, which a browser reads as another
 * host, so a result that starts with two slashes is refused as well as one on another origin.
 */
export function safeReturnTo(value: unknown, publicUrl: string): string | null {
  if (value === undefined) return '/';
  if (typeof value !== 'string' || value.length > 2048) return null;
  // eslint-disable-next-line no-control-regex -- control characters are exactly what must not pass
  if (!/^\/(?![/\\])/.test(value) || /[\u0000-\u001f\u007f\\]/.test(value)) return null;
  const base = new URL(publicUrl);
  const resolved = new URL(value, base);
  if (resolved.origin !== base.origin || resolved.pathname.startsWith('//')) return null;
  return `${resolved.pathname}${resolved.search}${resolved.hash}`;
}

/**
 * Whether the request reached the host PUBLIC_URL names (behind a trusted proxy, the forwarded one). The login and
 * session cookies belong to that host, and the issuer returns the browser there, so sign-in must start there too.
 */
export function onPublicHost(req: Request, publicUrl: string): boolean {
  const expected = new URL(publicUrl);
  const seen = req.host ? URL.parse(`${expected.protocol}//${req.host}`) : null;
  return seen?.host === expected.host;
}

/** A day: longer than any session lives, so a larger max_age asks for nothing. */
const MAX_AGE_LIMIT = 86_400;

/**
 * The step-up a sign-in asks the issuer for (RFC 9470 §4): `acr_values` (space-separated) and `max_age` (seconds), as
 * a 401 insufficient_user_authentication challenge names them. Undefined fields were not asked for; null: malformed.
 */
export function stepUpOf(query: Request['query']): { acrValues?: string; maxAge?: number } | null {
  const { acr_values: acrValues, max_age: maxAge } = query;
  const wanted: { acrValues?: string; maxAge?: number } = {};
  if (acrValues !== undefined) {
    const values = typeof acrValues === 'string' ? parseAcrValues(acrValues) : null;
    if (!values) return null;
    wanted.acrValues = values.join(' ');
  }
  if (maxAge !== undefined) {
    if (typeof maxAge !== 'string' || !/^\d{1,6}$/.test(maxAge) || Number(maxAge) > MAX_AGE_LIMIT) return null;
    wanted.maxAge = Number(maxAge);
  }
  return wanted;
}

function page(res: Response, status: number, title: string, message: string, link?: { href: string; text: string }) {
  res
    .status(status)
    .type('html')
    .send(errorPage({ title, message, ...(link ? { link } : {}) }));
}

/** A spent budget: a page for a browser, the API's problem for a client that asks for JSON. */
function refuseSpentBudget(req: Request, res: Response, charge: Charge) {
  const detail = `Too many sign-ins were started from this address; retry in ${charge.resetSeconds} seconds.`;
  if (req.accepts(['html', 'application/problem+json', 'json']) === 'html') {
    return page(res, 429, 'Too many sign-ins', detail);
  }
  sendProblem(req, res, 'RATE_LIMITED', detail);
}

/**
 * Browser sign-in (SPEC §7): /login → the issuer → /callback → a server-side session in an HttpOnly cookie;
 * /session reports it, /logout ends it everywhere. `login` is null when no web client is configured.
 */
export function createAuthRouter(deps: {
  config: Config;
  sessions: SessionStore;
  login: BrowserLogin | null;
  /** The rate budget every transport spends from; sign-in starts spend their client address's. */
  budget: RateBudget;
}) {
  const { config, sessions, login, budget } = deps;
  const cookies = authCookies(config.publicUrl);
  const trusted = trustedOrigins(config.publicUrl, config.corsOrigins);
  const redirectUri = `${config.publicUrl}/auth/callback`;
  const clearLoginCookie = serializeCookie(cookies.login, '', { path: '/auth', maxAge: 0, secure: cookies.secure });
  const clearSessionCookie = serializeCookie(cookies.session, '', { path: '/', maxAge: 0, secure: cookies.secure });

  const router = express.Router();
  router.use((_req, res, next) => {
    // Every answer here is about one browser's sign-in; no cache may keep or share it.
    res.setHeader('Cache-Control', 'no-store');
    next();
  });

  function notConfigured(res: Response) {
    page(
      res,
      503,
      'Browser sign-in is not configured',
      'OIDC_ISSUER is set without OIDC_CLIENT_ID: register a web client at the identity provider and set ' +
        'OIDC_CLIENT_ID and OIDC_CLIENT_SECRET. Bearer tokens keep working.',
    );
  }

  router.get('/login', async (req, res) => {
    if (!login) return notConfigured(res);
    const returnTo = safeReturnTo(req.query.returnTo, config.publicUrl);
    if (returnTo === null) {
      return page(res, 400, 'Cannot sign in', 'returnTo must be a path on this site, such as /orders.');
    }
    const stepUp = stepUpOf(req.query);
    if (stepUp === null) {
      return page(
        res,
        400,
        'Cannot sign in',
        `acr_values must be up to 10 space-separated values and max_age whole seconds up to ${MAX_AGE_LIMIT}, as a WWW-Authenticate challenge gives them.`,
      );
    }
    if (!onPublicHost(req, config.publicUrl)) {
      // Started on another name for this server (127.0.0.1 for localhost): the login cookie set here would never
      // reach the callback on PUBLIC_URL. Go there first, carrying only the checked, normalised parameters.
      const there = new URL('/auth/login', config.publicUrl);
      if (req.query.returnTo !== undefined) there.searchParams.set('returnTo', returnTo);
      if (stepUp.acrValues !== undefined) there.searchParams.set('acr_values', stepUp.acrValues);
      if (stepUp.maxAge !== undefined) there.searchParams.set('max_age', String(stepUp.maxAge));
      return res.redirect(303, there.href);
    }
    // Anyone can start a sign-in and each start stores a row, so starts spend their address's budget, as anonymous
    // API calls do; a refused one stores nothing and never reaches the issuer.
    const charge = await budget.charge(clientKey(ANONYMOUS, req.ip), SIGN_IN_START_PRICE);
    res.set(rateLimitHeaders(charge));
    if (!charge.allowed) return refuseSpentBudget(req, res, charge);
    let started;
    try {
      started = await login.start(stepUp);
    } catch (error) {
      if (!(error instanceof IssuerUnavailable)) throw error;
      req.log.warn({ event: 'auth.login_unavailable', reason: error.reason }, 'browser sign-in cannot start');
      return page(res, 503, 'Sign-in is unavailable', `${error.message} Please try again in a moment.`);
    }
    const attemptId = await sessions.saveLoginAttempt({ ...started.attempt, returnTo }, req.ip);
    res.setHeader(
      'Set-Cookie',
      serializeCookie(cookies.login, attemptId, {
        path: '/auth',
        maxAge: LOGIN_ATTEMPT_SECONDS,
        secure: cookies.secure,
      }),
    );
    res.redirect(302, started.authorizationUrl.href);
  });

  router.get('/callback', async (req, res) => {
    // The attempt is spent whatever happens next: the cookie goes, and takeLoginAttempt deletes the row.
    res.setHeader('Set-Cookie', clearLoginCookie);
    if (!login) return notConfigured(res);
    const attemptId = readCookie(req.headers.cookie, cookies.login);
    const attempt = attemptId ? await sessions.takeLoginAttempt(attemptId) : null;
    if (!attempt) {
      req.log.warn({ event: 'auth.callback_rejected', reason: 'no live login attempt' }, 'sign-in callback refused');
      return page(
        res,
        400,
        'Sign-in expired',
        'This sign-in has expired, was already completed, or was started in another browser. Please start again.',
        SIGN_IN_AGAIN,
      );
    }
    // The redirect URI exactly as registered, whatever host or proxy the request came through.
    const callbackUrl = new URL(redirectUri);
    callbackUrl.search = new URL(req.originalUrl, 'http://x').search;
    let established;
    try {
      established = await login.finish(callbackUrl, attempt);
    } catch (error) {
      if (error instanceof LoginRejected) {
        req.log.warn({ event: 'auth.callback_rejected', reason: error.reason }, 'sign-in callback refused');
        return page(res, 400, 'Sign-in failed', error.message, SIGN_IN_AGAIN);
      }
      if (error instanceof IssuerUnavailable) {
        req.log.warn({ event: 'auth.callback_unavailable', reason: error.reason }, 'sign-in callback failed');
        return page(res, 503, 'Sign-in is unavailable', `${error.message} Please try again in a moment.`);
      }
      throw error;
    }
    // Rotation: whatever session this browser had before signing in ends now.
    const previous = readCookie(req.headers.cookie, cookies.session);
    if (previous) await sessions.revoke(previous);
    const session = await sessions.create(established);
    req.log.info({ event: 'auth.login', sub: established.subject }, 'browser session started');
    res.append(
      'Set-Cookie',
      serializeCookie(cookies.session, session.id, {
        path: '/',
        maxAge: ABSOLUTE_TIMEOUT_SECONDS,
        secure: cookies.secure,
      }),
    );
    res.redirect(303, attempt.returnTo);
  });

  router.get('/session', async (req, res) => {
    const id = readCookie(req.headers.cookie, cookies.session);
    const session = id ? await sessions.touch(id) : null;
    if (!session) {
      return sendProblem(req, res, 'UNAUTHENTICATED', 'No session: sign in at /auth/login.', {
        headers: { 'WWW-Authenticate': bearerChallenge() },
      });
    }
    const { user, expiresAt } = session;
    res.json({
      sub: user.subject,
      name: user.name ?? null,
      email: user.email ?? null,
      roles: [...user.roles],
      scopes: [...user.scopes],
      // How the person signed in, from the ID token: what step-up (RFC 9470) checks for staff changes.
      acr: user.acr ?? null,
      amr: user.amr ? [...user.amr] : null,
      authTime: user.authTime === undefined ? null : new Date(user.authTime).toISOString(),
      expiresAt: expiresAt.toISOString(),
      // For a page script's sign-out (X-CSRF-Token); another site cannot read this answer.
      csrfToken: csrfTokenFor(id!),
    });
  });

  router.post('/logout', logoutForm, async (req, res) => {
    // A cross-site page must not be able to sign people out (login/logout CSRF): a foreign Origin is refused, and a
    // request carrying the session cookie must also carry that session's token (the home page's form has it), which
    // covers browsers that send no Origin.
    if (isForeignOrigin(req.headers.origin, trusted)) {
      return page(res, 403, 'Cannot sign out', 'Sign-out requests must come from this site.');
    }
    const id = readCookie(req.headers.cookie, cookies.session);
    const token = (req.body as { csrf?: unknown } | undefined)?.csrf ?? req.headers['x-csrf-token'];
    if (id && !isCsrfTokenFor(id, token)) {
      return page(
        res,
        403,
        'Cannot sign out',
        'This sign-out request did not come from a page of this site. Use the Sign out button on the home page.',
        HOME,
      );
    }
    const revoked = id ? await sessions.revoke(id) : null;
    if (revoked) req.log.info({ event: 'auth.logout' }, 'browser session ended');
    res.setHeader('Set-Cookie', clearSessionCookie);
    // Ending the issuer's session too, or the next /auth/login would sign the same person in without asking.
    const endSession = login ? await login.endSessionUrl(revoked?.idToken) : null;
    res.redirect(303, endSession?.href ?? '/');
  });

  // Starting a sign-in, its callback and the session are read with GET (HEAD too); any other method is 405 naming
  // them (RFC 9110 §15.5.6), not a 404 for a path that exists.
  router.all(['/login', '/callback', '/session'], (req, res) => {
    sendProblem(req, res, 'METHOD_NOT_ALLOWED', `${req.method} is not supported here; use GET.`, {
      headers: { Allow: 'GET, HEAD' },
    });
  });

  router.all('/logout', (req, res) => {
    // A link or a prefetch must not sign anyone out.
    sendProblem(req, res, 'METHOD_NOT_ALLOWED', 'Sign out with POST /auth/logout (the home page has a button).', {
      headers: { Allow: 'POST' },
    });
  });

  router.use((error: unknown, req: Request, res: Response, next: NextFunction) => {
    // A body the sign-out form could not have sent (too large, wrong charset) is the client's error, not ours.
    if (res.headersSent || unreadableRequest(error, '1kb')) return next(error);
    // The database (sessions, login attempts) is down: the server's condition, 503 with Retry-After as everywhere.
    if (isUnavailable(error)) {
      req.log.warn(
        { event: 'auth.login_unavailable', reason: 'database' },
        'browser sign-in cannot reach the database',
      );
      res.set(RETRY_LATER);
      return page(
        res,
        UNAVAILABLE_STATUS,
        'Sign-in is unavailable',
        'The service cannot reach its database. Please try again in a moment.',
      );
    }
    req.log.error({ err: error }, 'browser sign-in failed');
    page(res, 500, 'Something went wrong', `Sign-in failed unexpectedly; quote request id ${String(req.id)}.`);
  });

  return router;
}
