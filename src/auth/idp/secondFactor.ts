import express, { type Request, type Response, type Router } from 'express';
import type Provider from 'oidc-provider';
import type { InteractionDetails } from 'oidc-provider';
import type { Logger } from 'pino';
import type { Queryable } from '../../store/db.js';
import { credentialsOf } from '../../store/idpFactors.js';
import { secondFactorPage, SCRIPT_PAGE_POLICY } from './factorPages.js';
import { MAX_RESPONSE_CHARS, PasskeyRefused, type PasskeyService } from './passkeys.js';
import { mfaRequested, onlyStepUpAsked } from './signInMethods.js';
import type { SigninThrottle } from './signinThrottle.js';
import { checkTotp, hasTotp } from './totp.js';
import { findUserBySubject } from './users.js';

/** What the sign-in routes share with the second-factor step (interactions.ts). */
export interface SecondFactorKit {
  readonly provider: Provider;
  readonly db: Queryable;
  readonly logger: Logger;
  readonly throttle: SigninThrottle;
  readonly passkeys: PasskeyService;
  readonly accountUrl: string;
  readonly assets: string;
  actionFor(uid: string, step: 'abort' | 'totp' | 'passkey'): string;
  /** The interaction's own page, which shows whatever step it is at. */
  pageOf(uid: string): string;
  currentInteraction(req: Request, res: Response, prompt?: string): Promise<InteractionDetails>;
  clientName(clientId: string): Promise<string>;
  finishLogin(req: Request, res: Response, subject: string, methods: string[], verifiedUser?: boolean): Promise<void>;
  renderLogin(
    res: Response,
    details: InteractionDetails,
    status: number,
    fields?: { username?: string; error?: string },
  ): Promise<void>;
  renderPasskey(res: Response, details: InteractionDetails, status: number, error?: string): Promise<void>;
}

/** Who is signing in and which methods they have already passed, when only a second factor is missing. */
export interface SecondStage {
  readonly subject: string;
  readonly methods: readonly string[];
}

/** Kept in the interaction (server-side) between the password and the second factor. */
type PasswordPassed = {
  readonly passwordPassed: { readonly subject: string; readonly methods: readonly string[] };
};

const WRONG_CODE = 'Wrong code. Enter the 6 digits your authenticator app shows now.';
const USED_CODE = 'This code was already used. Wait for the next code in your authenticator app.';
const TOO_MANY = (seconds: number) =>
  `Too many wrong codes. Try again in ${seconds < 120 ? `${seconds} seconds` : `${Math.ceil(seconds / 60)} minutes`}.`;
const MAX_CODE_LENGTH = 16;
/** OpenID Connect's answer to a client that insists on an acr the account cannot reach. */
const NO_SECOND_FACTOR = {
  error: 'unmet_authentication_requirements',
  error_description: 'this account has no second factor; add one on the account page',
};

/**
 * The second factor (RFC 8176 `otp`, `hwk`/`swk`) of a sign-in that asks for `urn:orders:acr:mfa`: after the password
 * in the same interaction, or on its own when a signed-in session is only asked for more (a step-up without
 * `max_age`). oidc-provider's login prompt decides when this is needed (its essential-acr checks and ours for
 * `acr_values`, embeddedIdp.ts); these routes only carry it out.
 */
export function secondFactorRoutes(router: Router, kit: SecondFactorKit) {
  const { provider, db, logger, throttle, passkeys } = kit;
  const codeForm = express.urlencoded({ extended: false, limit: '1kb', parameterLimit: 5 });
  // A passkey answer is JSON in one field: up to MAX_RESPONSE_CHARS, percent-encoded (at most three bytes each).
  const passkeyForm = express.urlencoded({ extended: false, limit: MAX_RESPONSE_CHARS * 3 + 1024, parameterLimit: 5 });

  function stageOf(details: InteractionDetails): SecondStage | null {
    const passed = (details.result as Partial<PasswordPassed> | undefined)?.passwordPassed;
    if (passed && typeof passed.subject === 'string' && Array.isArray(passed.methods)) return passed;
    const session = details.session;
    if (session?.accountId && onlyStepUpAsked(details)) {
      return { subject: session.accountId, methods: (session.amr as string[] | undefined) ?? [] };
    }
    return null;
  }

  async function factorsOf(subject: string) {
    const [totp, keys] = await Promise.all([hasTotp(db, subject), credentialsOf(db, subject)]);
    return { totp, passkeys: keys.length > 0 };
  }

  async function show(
    req: Request,
    res: Response,
    details: InteractionDetails,
    stage: SecondStage,
    refusal?: { status: number; error: string },
  ): Promise<void> {
    const [factors, user] = await Promise.all([factorsOf(stage.subject), findUserBySubject(db, stage.subject)]);
    if (!factors.totp && !factors.passkeys && !refusal) {
      // Asked for by a signed-in session that has nothing more to give: an insisting client gets the OpenID error,
      // any other goes on at the level the session has (`stepUp` tells the acr_values check not to ask again).
      const result = mfaRequested(details).essential ? NO_SECOND_FACTOR : { stepUp: 'unavailable' };
      await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
      return;
    }
    const passkey = factors.passkeys
      ? {
          action: kit.actionFor(details.uid, 'passkey'),
          options: await passkeys.authenticationOptions(details.uid, stage.subject),
          assets: kit.assets,
        }
      : undefined;
    res
      .status(refusal?.status ?? 200)
      .set('Content-Security-Policy', SCRIPT_PAGE_POLICY)
      .type('html')
      .send(
        secondFactorPage({
          name: user?.name ?? stage.subject,
          clientName: await kit.clientName(details.params.client_id ?? ''),
          ...(factors.totp ? { totpAction: kit.actionFor(details.uid, 'totp') } : {}),
          ...(passkey ? { passkey } : {}),
          abortAction: kit.actionFor(details.uid, 'abort'),
          accountUrl: kit.accountUrl,
          ...(refusal ? { error: refusal.error } : {}),
        }),
      );
  }

  /**
   * After a correct password: when the request asks for two factors and the account has one, the interaction
   * remembers the password (server-side) and shows the second step. True when it did.
   */
  async function afterPassword(req: Request, res: Response, details: InteractionDetails, subject: string) {
    const requested = mfaRequested(details);
    if (!requested.wanted) return false;
    const factors = await factorsOf(subject);
    if (!factors.totp && !factors.passkeys) {
      if (!requested.essential) return false;
      await provider.interactionFinished(req, res, NO_SECOND_FACTOR, { mergeWithLastSubmission: false });
      return true;
    }
    const remembered: PasswordPassed = { passwordPassed: { subject, methods: ['pwd'] } };
    await provider.interactionResult(req, res, remembered, { mergeWithLastSubmission: false });
    res.redirect(303, kit.pageOf(details.uid));
    return true;
  }

  /** The interaction of this page, at its second step; anything else started over. */
  async function secondStep(req: Request, res: Response) {
    const details = await kit.currentInteraction(req, res, 'login');
    return { details, stage: stageOf(details) };
  }

  router.post('/interaction/:uid/totp', codeForm, async (req, res) => {
    const { details, stage } = await secondStep(req, res);
    if (!stage) return kit.renderLogin(res, details, 400, { error: 'Sign in with your password first.' });
    const body = (req.body ?? {}) as { code?: unknown };
    const code = typeof body.code === 'string' ? body.code.slice(0, MAX_CODE_LENGTH) : '';
    // Counted per account, apart from its passwords (signinThrottle.ts's AttemptKind).
    const verdict = await throttle.begin(stage.subject, req.ip, 'second-factor');
    if (verdict.locked) {
      logger.warn({ event: 'idp.second_factor_locked', sub: stage.subject }, 'embedded IdP second factor locked');
      res.set('Retry-After', String(verdict.retryAfterSeconds));
      return show(req, res, details, stage, { status: 429, error: TOO_MANY(verdict.retryAfterSeconds) });
    }
    if (verdict.delayMs) await new Promise((resolve) => setTimeout(resolve, verdict.delayMs));
    const outcome = await checkTotp(db, stage.subject, code);
    if (outcome !== 'accepted') {
      logger.info({ event: 'idp.totp_failed', sub: stage.subject, outcome }, 'embedded IdP TOTP refused');
      const error = outcome === 'replayed' ? USED_CODE : outcome === 'wrong' ? WRONG_CODE : 'No authenticator app.';
      return show(req, res, details, stage, { status: outcome === 'not_enrolled' ? 400 : 401, error });
    }
    await throttle.succeeded(stage.subject, req.ip, 'second-factor');
    await kit.finishLogin(req, res, stage.subject, [...stage.methods, 'otp']);
  });

  router.get('/interaction/:uid/passkey', async (req, res) => {
    const { details, stage } = await secondStep(req, res);
    // At the second step, the passkey is offered on the step's own page.
    if (stage) res.redirect(303, kit.pageOf(details.uid));
    else await kit.renderPasskey(res, details, 200);
  });

  router.post('/interaction/:uid/passkey', passkeyForm, async (req, res) => {
    const { details, stage } = await secondStep(req, res);
    const raw = (req.body as { response?: unknown } | undefined)?.response;
    if (typeof raw !== 'string' || raw === '') {
      const error = 'The passkey sent no answer (passkeys need JavaScript in the browser).';
      return stage
        ? show(req, res, details, stage, { status: 400, error })
        : kit.renderPasskey(res, details, 400, error);
    }
    try {
      const signedIn = await passkeys.authenticate(details.uid, raw, stage?.subject);
      if (stage) await kit.finishLogin(req, res, stage.subject, [...stage.methods, ...signedIn.methods]);
      else await kit.finishLogin(req, res, signedIn.subject, signedIn.methods, signedIn.outcome.amr.includes('mfa'));
    } catch (error) {
      if (!(error instanceof PasskeyRefused)) throw error;
      logger.info({ event: 'idp.passkey_refused', reason: error.message }, 'embedded IdP passkey refused');
      const status = /larger than/.test(error.message) ? 413 : 401;
      if (stage) await show(req, res, details, stage, { status, error: error.message });
      else await kit.renderPasskey(res, details, status, error.message);
    }
  });

  return { stageOf, show, afterPassword };
}
