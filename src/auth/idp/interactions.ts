import express from 'express';
import type { NextFunction, Request, Response, Router } from 'express';
import type { Logger } from 'pino';
import type Provider from 'oidc-provider';
import { errors } from 'oidc-provider';
import type { InteractionDetails } from 'oidc-provider';
import type { Queryable } from '../../store/db.js';
import { FIRST_PARTY_CLIENTS } from './clients.js';
import { passkeyPage, SCRIPT_PAGE_POLICY } from './factorPages.js';
import { consentPage, errorPage, loginPage, PAGE_POLICY } from './pages.js';
import type { PasskeyService } from './passkeys.js';
import { secondFactorRoutes, type SecondFactorKit } from './secondFactor.js';
import { outcomeOf } from './signInMethods.js';
import type { SigninThrottle } from './signinThrottle.js';
import { unreadableForm } from './unreadableForms.js';
import { verifyCredentials } from './users.js';

const WRONG_CREDENTIALS = 'Wrong username or password.';
const SLOWED_DOWN = `${WRONG_CREDENTIALS} After repeated failures each attempt is slowed down, and a few more lock sign-in for this username for a while.`;
export const tooManyAttempts = (seconds: number) =>
  `Too many failed sign-in attempts. Try again in ${seconds < 120 ? `${seconds} seconds` : `${Math.ceil(seconds / 60)} minutes`}.`;
// Argon2 work is spent on every attempt; absurd inputs are rejected before that.
const MAX_FIELD_LENGTH = 1024;

interface LoginForm {
  username?: unknown;
  password?: unknown;
}

/**
 * The login and consent pages oidc-provider redirects to (interactions.url points at `${basePath}/interaction/:uid`).
 * Only these routes parse urlencoded bodies: oidc-provider reads the raw body of its own endpoints.
 */
export function interactionRoutes(opts: {
  provider: Provider;
  db: Queryable;
  basePath: string;
  logger: Logger;
  throttle: SigninThrottle;
  passkeys: PasskeyService;
  /** The account page, where second factors are added. */
  accountUrl: string;
}): Router {
  const { provider, db, basePath, logger, throttle, passkeys } = opts;
  const router = express.Router();
  const form = express.urlencoded({ extended: false, limit: '8kb', parameterLimit: 10 });
  const actionFor = (uid: string, step: 'login' | 'confirm' | 'abort' | 'totp' | 'passkey') =>
    `${basePath}/interaction/${encodeURIComponent(uid)}/${step}`;
  const assets = `${basePath}/assets`;

  /**
   * The sign-in page: the password form, whose second button leads to signing in with a passkey alone (its own page:
   * this one stays free of scripts, and the same for every visitor).
   */
  async function renderLogin(
    res: Response,
    details: InteractionDetails,
    status: number,
    fields: { username?: string; error?: string } = {},
  ): Promise<void> {
    res
      .status(status)
      .set('Content-Security-Policy', PAGE_POLICY)
      .type('html')
      .send(
        loginPage({
          action: actionFor(details.uid, 'login'),
          clientName: await clientName(details.params.client_id ?? ''),
          passkeyChoice: true,
          ...fields,
        }),
      );
  }

  /** Signing in with a passkey alone: a discoverable credential whose authenticator verifies its user. */
  async function renderPasskey(res: Response, details: InteractionDetails, status: number, error?: string) {
    res
      .status(status)
      .set('Content-Security-Policy', SCRIPT_PAGE_POLICY)
      .type('html')
      .send(
        passkeyPage({
          clientName: await clientName(details.params.client_id ?? ''),
          passkey: {
            action: actionFor(details.uid, 'passkey'),
            options: await passkeys.authenticationOptions(details.uid),
            assets,
          },
          passwordUrl: `${basePath}/interaction/${encodeURIComponent(details.uid)}`,
          ...(error ? { error } : {}),
        }),
      );
  }

  /** Ends the interaction signed in with these methods: oidc-provider puts acr and amr into the tokens. */
  async function finishLogin(req: Request, res: Response, subject: string, methods: string[], verifiedUser = false) {
    const { acr, amr } = outcomeOf(methods, verifiedUser);
    logger.info({ event: 'idp.login', sub: subject, acr, amr }, 'embedded IdP sign-in');
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: subject, acr, amr: [...amr] } },
      { mergeWithLastSubmission: false },
    );
  }

  router.use('/interaction', (_req, res, next) => {
    res.set('Cache-Control', 'no-store');
    next();
  });

  router.get('/interaction/:uid', async (req, res) => {
    const details = await currentInteraction(req, res);
    const clientId = details.params.client_id ?? '';
    if (details.prompt.name === 'login') {
      const stage = secondFactor.stageOf(details);
      if (stage) await secondFactor.show(req, res, details, stage);
      else await renderLogin(res, details, 200);
      return;
    }
    if (details.prompt.name === 'consent') {
      // Explicit prompt=consent still shows the page, as OpenID Connect asks.
      if (FIRST_PARTY_CLIENTS.has(clientId) && !details.prompt.reasons.includes('consent_prompt')) {
        await grantConsent(req, res, details);
        return;
      }
      res
        .set('Content-Security-Policy', PAGE_POLICY)
        .type('html')
        .send(
          consentPage({
            confirmAction: actionFor(details.uid, 'confirm'),
            abortAction: actionFor(details.uid, 'abort'),
            clientName: await clientName(clientId),
            scopes: requestedScopes(details),
          }),
        );
      return;
    }
    throw new UnexpectedPrompt(details.prompt.name);
  });

  router.post('/interaction/:uid/login', form, async (req, res) => {
    const details = await currentInteraction(req, res, 'login');
    const body = (req.body ?? {}) as LoginForm;
    const username = typeof body.username === 'string' ? body.username.slice(0, MAX_FIELD_LENGTH) : '';
    const password = typeof body.password === 'string' ? body.password : '';
    if ((req.body as { method?: unknown } | undefined)?.method === 'passkey') {
      res.redirect(303, actionFor(details.uid, 'passkey'));
      return;
    }
    const retryLogin = (status: number, error: string) => renderLogin(res, details, status, { username, error });
    // The verdict depends only on earlier failures for this name and address, never on whether the user exists.
    const verdict = await throttle.begin(username, req.ip);
    if (verdict.locked) {
      logger.warn({ event: 'idp.login_locked', clientId: details.params.client_id }, 'embedded IdP sign-in locked');
      res.set('Retry-After', String(verdict.retryAfterSeconds));
      await retryLogin(429, tooManyAttempts(verdict.retryAfterSeconds));
      return;
    }
    if (verdict.delayMs) await new Promise((resolve) => setTimeout(resolve, verdict.delayMs));
    const user =
      username && password && password.length <= MAX_FIELD_LENGTH
        ? await verifyCredentials(db, username, password)
        : undefined;
    if (!user) {
      logger.info({ event: 'idp.login_failed', clientId: details.params.client_id }, 'embedded IdP sign-in failed');
      await retryLogin(401, verdict.delayMs ? SLOWED_DOWN : WRONG_CREDENTIALS);
      return;
    }
    await throttle.succeeded(username, req.ip);
    if (await secondFactor.afterPassword(req, res, details, user.subject)) return;
    await finishLogin(req, res, user.subject, ['pwd']);
  });

  router.post('/interaction/:uid/confirm', form, async (req, res) => {
    const details = await currentInteraction(req, res, 'consent');
    await grantConsent(req, res, details);
  });

  router.post('/interaction/:uid/abort', form, async (req, res) => {
    await currentInteraction(req, res);
    await provider.interactionFinished(
      req,
      res,
      { error: 'access_denied', error_description: 'End-User aborted interaction' },
      { mergeWithLastSubmission: false },
    );
  });

  const kit: SecondFactorKit = {
    provider,
    db,
    logger,
    throttle,
    passkeys,
    accountUrl: opts.accountUrl,
    assets,
    actionFor,
    pageOf: (uid) => `${basePath}/interaction/${encodeURIComponent(uid)}`,
    currentInteraction,
    clientName,
    finishLogin,
    renderLogin,
    renderPasskey,
  };
  const secondFactor = secondFactorRoutes(router, kit);

  router.use('/interaction', (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    // Bodies the forms could not have sent: too large (an oversized passkey answer), more fields than a form has, or
    // unreadable.
    const refused = unreadableForm(err);
    if (refused) {
      res
        .status(refused.status)
        .type('html')
        .send(
          errorPage({
            title: 'Sign-in refused',
            message: refused.tooMuch
              ? 'The form sent more than a sign-in ever needs, so it was not read. Go back and try again.'
              : 'The form could not be read. Go back and try again.',
          }),
        );
      return;
    }
    // A path that is not percent-encoded UTF-8 names no interaction (the router could not decode its uid).
    if (err instanceof URIError) {
      res
        .status(400)
        .type('html')
        .send(
          errorPage({
            title: 'Sign-in refused',
            message: 'This sign-in address is not valid. Go back to the application and start again.',
          }),
        );
      return;
    }
    if (err instanceof errors.SessionNotFound || err instanceof StaleInteraction || err instanceof UnexpectedPrompt) {
      res
        .status(400)
        .type('html')
        .send(
          errorPage({
            title: 'Sign-in expired',
            message:
              'This sign-in request has expired or was already completed. Go back to the application and start again.',
          }),
        );
      return;
    }
    logger.error({ err }, 'embedded IdP interaction failed');
    res
      .status(500)
      .type('html')
      .send(errorPage({ title: 'Something went wrong', message: 'Sign-in failed unexpectedly. Please try again.' }));
  });

  /** The interaction the cookie points at, checked against the page the browser thinks it is on. */
  async function currentInteraction(req: Request, res: Response, prompt?: string): Promise<InteractionDetails> {
    const details = await provider.interactionDetails(req, res);
    if (details.uid !== req.params.uid) throw new StaleInteraction();
    if (prompt && details.prompt.name !== prompt) throw new UnexpectedPrompt(details.prompt.name);
    return details;
  }

  // Same shape as oidc-provider's example confirm route: grant exactly what the prompt reports missing.
  async function grantConsent(req: Request, res: Response, details: InteractionDetails): Promise<void> {
    const accountId = details.session?.accountId;
    const clientId = details.params.client_id;
    if (!accountId || !clientId) throw new errors.SessionNotFound('interaction has no signed-in account');
    const grant =
      (details.grantId ? await provider.Grant.find(details.grantId) : undefined) ??
      new provider.Grant({ accountId, clientId });
    const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = details.prompt.details;
    if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
    if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(
      req,
      res,
      { consent: details.grantId ? {} : { grantId } },
      { mergeWithLastSubmission: true },
    );
  }

  async function clientName(clientId: string): Promise<string> {
    const client = clientId ? await provider.Client.find(clientId) : undefined;
    return client?.clientName ?? clientId;
  }

  return router;
}

function requestedScopes(details: InteractionDetails): string[] {
  const { missingOIDCScope = [], missingResourceScopes = {} } = details.prompt.details;
  const scopes = new Set([...missingOIDCScope, ...Object.values(missingResourceScopes).flat()]);
  // Native clients are prompted even when nothing is missing; show what the request asks for then.
  if (scopes.size === 0 && typeof details.params.scope === 'string') {
    for (const s of details.params.scope.split(' ')) if (s) scopes.add(s);
  }
  return [...scopes];
}

export class StaleInteraction extends Error {
  constructor() {
    super('interaction cookie does not belong to this page');
  }
}

export class UnexpectedPrompt extends Error {
  constructor(prompt: string) {
    super(`unexpected interaction prompt ${prompt}`);
  }
}
