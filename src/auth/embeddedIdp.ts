import { createHash } from 'node:crypto';
import express from 'express';
import type { Router } from 'express';
import type { Redis } from 'ioredis';
import type { JSONWebKeySet } from 'jose';
import type { Logger } from 'pino';
import Provider, { errors, interactionPolicy } from 'oidc-provider';
import type { Configuration, KoaContextWithOIDC } from 'oidc-provider';
import type { Database } from '../store/db.js';
import { PostgresAdapter, sweepExpiredModels } from '../store/idp.js';
import { ACR } from '../domain/policy.js';
import { accountRoutes } from './idp/account.js';
import { assetRoutes } from './idp/assets.js';
import {
  DIRECTORY_CLIENT_ID,
  DIRECTORY_SCOPE,
  FIRST_PARTY_CLIENTS,
  allowLoopbackReplicas,
  clientMetadata,
} from './idp/clients.js';
import { interactionRoutes } from './idp/interactions.js';
import { passkeyService, relyingPartyOf } from './idp/passkeys.js';
import { satisfies } from './idp/signInMethods.js';
import { loadOrCreateSecrets, toPublicJwks } from './idp/keys.js';
import { AUTO_SIGN_OUT_SCRIPT, errorPage, loggedOutPage, logoutPage, signingOutPage } from './idp/pages.js';
import { createSigninThrottle } from './idp/signinThrottle.js';
import { seedDemoTotp } from './idp/totp.js';
import { userinfoTwins } from './idp/userinfo.js';
import { findUserBySubject, seedDemoUsers, type Argon2Params } from './idp/users.js';
import { normalizedUri } from './uriNormalization.js';

export interface EmbeddedIdp {
  /** Express router to mount with app.use('/idp', idp.router). Contains the interaction (login/consent) routes and then provider.callback(). */
  readonly router: Router;
  /** Public JWKS (only public key parts) the API uses to verify access tokens locally. */
  readonly publicJwks: JSONWebKeySet;
  readonly issuer: string;
  close(): Promise<void>;
}

export interface EmbeddedIdpOptions {
  /** e.g. http://127.0.0.1:54321/idp (= PUBLIC_URL + '/idp') */
  issuer: string;
  /** The API's own base URL, e.g. http://127.0.0.1:54321 */
  publicUrl: string;
  db: Database;
  /** API_AUDIENCE: the `aud` of every access token this IdP issues. */
  audience: string;
  /** Behind a trusted proxy: keep X-Forwarded-For (host and protocol are pinned to the issuer regardless). */
  trustProxy: boolean;
  logger: Logger;
  /** Where sign-in failures are counted, so every replica sees them; in process without it. */
  redis?: Redis;
  /** How long repeated failures lock a username or address (SIGNIN_LOCK_S). */
  signinLockSeconds?: number;
  /** The wait added to each sign-in attempt past the first failures; shorter only under NODE_ENV=test (signinDelayMs). */
  signinDelayMs?: number;
  /** Argon2 cost for the demo users' password hashes; cheaper only under NODE_ENV=test (argon2Params). */
  passwordHashing?: Argon2Params;
  /** How recent a sign-in must be to change its factors (STEP_UP_MAX_AGE_S; 900 s without it). */
  factorChangeMaxAgeSeconds?: number | undefined;
}

/** Scopes of the orders API, granted on its resource server. */
const API_SCOPES = 'orders:read orders:write';
const HOUR = 60 * 60;
const DAY = 24 * HOUR;
const SWEEP_INTERVAL_MS = 15 * 60 * 1000;

const ERROR_EVENTS = [
  'authorization.error',
  'backchannel.error',
  'discovery.error',
  'end_session.error',
  'grant.error',
  'introspection.error',
  'jwks.error',
  'revocation.error',
  'userinfo.error',
] as const;

/**
 * OpenID Connect RP-Initiated Logout §2 asks the user to confirm unless the request carries an `id_token_hint` that
 * belongs to the current session and user. oidc-provider has already verified the hint's signature, issuer and
 * audience when it calls logoutSource; what is left is that it names this session's user (and, when it carries one,
 * this session's `sid`) for a client that signed in within it. Anything else still gets the question.
 */
function hintIsForThisSession(ctx: KoaContextWithOIDC): boolean {
  const hint = ctx.oidc.entities?.IdTokenHint?.payload;
  const { session, client } = ctx.oidc;
  if (!hint || !session?.accountId || !client) return false;
  return (
    hint.sub === session.accountId &&
    session.authorizations?.[client.clientId] !== undefined &&
    (hint.sid === undefined || hint.sid === session.sidFor(client.clientId))
  );
}

/**
 * oidc-provider's interaction policy, plus one check of the login prompt: `acr_values` (voluntary, OpenID Connect
 * Core §3.1.2.1) naming only classes above the session's asks the person to sign in again — for a session that
 * signed in with a password, only the second factor (secondFactor.ts). The essential `acr` of the claims parameter is
 * oidc-provider's own check. After an interaction has answered (`login`, or `stepUp` when there is nothing more to
 * give), the authorization goes on with what the session has, as a voluntary request allows.
 */
function stepUpPolicy(): interactionPolicy.Policy {
  const { Check, base } = interactionPolicy;
  const policy = base();
  policy.get('login')!.checks.add(
    new Check(
      'acr_values',
      'requested ACR not yet obtained',
      (ctx) => {
        const requested = ctx.oidc.claims?.id_token?.acr;
        if (!requested?.values || requested.essential || ctx.oidc.result?.login || ctx.oidc.result?.stepUp) {
          return Check.NO_NEED_TO_PROMPT;
        }
        return satisfies(ctx.oidc.acr, requested.values) ? Check.NO_NEED_TO_PROMPT : Check.REQUEST_PROMPT;
      },
      (ctx) => ({ acr: ctx.oidc.claims?.id_token?.acr }),
    ),
  );
  return policy;
}

/** Under a policy with script-src, the one inline script is allowed by its hash, as oidc-provider does for its own. */
function allowInlineScript(ctx: KoaContextWithOIDC, script: string): void {
  const policy = ctx.response.get('content-security-policy');
  if (!policy || !/(^|;)\s*script-src\s/.test(policy)) return;
  const hash = `'sha256-${createHash('sha256').update(script).digest('base64')}'`;
  ctx.set('content-security-policy', policy.replace(/((?:^|;)\s*script-src\s[^;]*)/, `$1 ${hash}`));
}

/**
 * The development OpenID provider: oidc-provider backed by the app's database, issuing RS256 JWT access tokens
 * whose audience is the orders API.
 */
export async function createEmbeddedIdp(opts: EmbeddedIdpOptions): Promise<EmbeddedIdp> {
  const { db, audience, logger } = opts;
  const issuer = opts.issuer.replace(/\/+$/, '');
  const basePath = new URL(issuer).pathname.replace(/\/+$/, '');

  const secrets = await loadOrCreateSecrets(db);
  await seedDemoUsers(db, opts.passwordHashing);
  await seedDemoTotp(db);

  // Resource indicators must be absolute URIs (RFC 8707 §2); a bare audience such as 'orders-api' becomes a URN. The
  // API's own URL (PUBLIC_URL) names the same resource server: it is what clients that follow RFC 8707 send.
  const resourceIndicator = URL.canParse(audience) ? audience : `urn:${encodeURIComponent(audience)}`;
  const apiUrl = opts.publicUrl.replace(/\/+$/, '');
  const apiResources = [...new Set([resourceIndicator, apiUrl])];
  // Indicators are compared as URIs, not strings (RFC 3986 §6.2): `http://host:4150/` names what `http://host:4150`
  // does, and `new URL()` adds that slash.
  const apiResourceUris = new Set(apiResources.map((r) => normalizedUri(r)?.href));
  const isApiResource = (indicator: string) => apiResourceUris.has(normalizedUri(indicator)?.href ?? '');
  const twins = userinfoTwins({
    secret: secrets.cookieKeys[0]!,
    issuer,
    audience,
    publicJwks: toPublicJwks(secrets.signingKeys),
  });

  const configuration: Configuration = {
    adapter: (model) => new PostgresAdapter(db, model),
    clients: clientMetadata(opts.publicUrl),
    jwks: { keys: secrets.signingKeys },
    cookies: {
      keys: secrets.cookieKeys,
      // Distinct from whatever cookies the app itself sets on the same host.
      names: { session: 'idp_session', interaction: 'idp_interaction', resume: 'idp_interaction_resume' },
    },
    // The API's scopes are listed too, so discovery's scopes_supported names every scope a client may ask for.
    scopes: ['openid', 'offline_access', 'profile', 'email', ...API_SCOPES.split(' '), DIRECTORY_SCOPE],
    // How the person signed in goes into every ID token (and, below, every access token): what step-up reads.
    acrValues: [ACR.password, ACR.mfa],
    claims: {
      openid: ['sub', 'acr', 'amr', 'auth_time'],
      profile: ['name', 'preferred_username'],
      email: ['email', 'email_verified'],
    },
    // The ID token carries the profile claims too, so a client need not call userinfo (it may: see userinfo.ts).
    conformIdTokenClaims: false,
    responseTypes: ['code'],
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
    pkce: { required: () => true },
    clockTolerance: 5,
    ttl: {
      AccessToken: HOUR,
      AuthorizationCode: 60,
      ClientCredentials: HOUR,
      IdToken: HOUR,
      RefreshToken: 14 * DAY,
      Interaction: HOUR,
      Session: 14 * DAY,
      Grant: 14 * DAY,
    },
    interactions: {
      url: (_ctx, interaction) => `${basePath}/interaction/${interaction.uid}`,
      policy: stepUpPolicy(),
    },
    async findAccount(_ctx, sub) {
      const user = await findUserBySubject(db, sub);
      if (!user) return undefined;
      return {
        accountId: user.subject,
        claims: () => ({
          sub: user.subject,
          name: user.name,
          email: user.email,
          email_verified: true,
          preferred_username: user.username,
        }),
      };
    },
    // oidc-provider drops offline_access unless prompt=consent is sent (OpenID Connect Core §11); our own apps get
    // refresh tokens without that, bound to the sign-in session since they carry no offline_access.
    async issueRefreshToken(_ctx, client, code) {
      return (
        client.grantTypeAllowed('refresh_token') &&
        (code.scopes.has('offline_access') || FIRST_PARTY_CLIENTS.has(client.clientId))
      );
    },
    async extraTokenClaims(ctx, token) {
      if (token.kind !== 'AccessToken' || !token.accountId) return undefined;
      await twins.save(ctx, token);
      const user = await findUserBySubject(db, token.accountId);
      // RFC 9068 §2.2.1: the sign-in behind the token, from the code or refresh token it was issued for. A refreshed
      // token keeps the original auth_time, so max_age still measures from the sign-in.
      const grant = ctx.oidc.entities?.AuthorizationCode ?? ctx.oidc.entities?.RefreshToken;
      return {
        roles: [...(user?.roles ?? [])],
        name: user?.name,
        email: user?.email,
        ...(grant?.acr ? { acr: grant.acr } : {}),
        ...(grant?.amr ? { amr: grant.amr } : {}),
        ...(grant?.authTime ? { auth_time: grant.authTime } : {}),
      };
    },
    clientBasedCORS: () => false,
    renderError(ctx, out) {
      ctx.type = 'html';
      ctx.body = errorPage({
        title: 'Sign-in problem',
        message: out.error_description ?? 'The request could not be completed.',
        detail: out.error,
      });
    },
    features: {
      devInteractions: { enabled: false },
      // The development directory's tokens (SCIM provisioning) come from the client-credentials grant.
      clientCredentials: { enabled: true },
      // Lets a client insist on an acr (`"essential": true`), which oidc-provider's own login checks enforce.
      claimsParameter: { enabled: true },
      introspection: { enabled: false },
      revocation: {
        enabled: true,
        allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId,
      },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource(ctx, form) {
          ctx.type = 'html';
          if (hintIsForThisSession(ctx)) {
            allowInlineScript(ctx, AUTO_SIGN_OUT_SCRIPT);
            ctx.body = signingOutPage({ form });
          } else {
            ctx.body = logoutPage({ form, host: ctx.host });
          }
        },
        postLogoutSuccessSource(ctx) {
          ctx.type = 'html';
          ctx.body = loggedOutPage(ctx.oidc.client?.clientName);
        },
      },
      resourceIndicators: {
        enabled: true,
        // Clients (and `npm run token`) may send no resource parameter: every request is for the orders API. Without
        // one, both of its names are granted, so a token request may then name either.
        async defaultResource(_ctx, client, oneOf) {
          if (oneOf) return oneOf.find(isApiResource) ?? oneOf;
          // The client-credentials grant takes a single resource.
          if (client?.clientId === DIRECTORY_CLIENT_ID) return resourceIndicator;
          return apiResources.length === 1 ? resourceIndicator : apiResources;
        },
        useGrantedResource: async () => true,
        async getResourceServerInfo(_ctx, indicator, client) {
          if (!isApiResource(indicator)) {
            throw new errors.InvalidTarget(`the only resource here is the orders API: ${apiResources.join(' or ')}`);
          }
          return {
            // Provisioning is the directory's alone; orders are everyone else's.
            scope: client.clientId === DIRECTORY_CLIENT_ID ? DIRECTORY_SCOPE : API_SCOPES,
            audience,
            accessTokenTTL: HOUR,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  };

  const provider = new Provider(issuer, configuration);
  // The provider builds every URL it prints (discovery, form actions) from the request's host and protocol; the
  // router below pins those to the issuer's, so they can be trusted whatever the request or a proxy said.
  provider.proxy = true;
  allowLoopbackReplicas(provider.Client);

  provider.on('server_error', (_ctx: KoaContextWithOIDC, err: Error) => {
    logger.error({ err }, 'embedded IdP server error');
  });
  // Koa's own error event; without a listener Koa prints these to stderr.
  provider.on('error', (err: Error) => {
    logger.error({ err }, 'embedded IdP request failed');
  });
  for (const event of ERROR_EVENTS) {
    // Only the OAuth error code and description: request parameters may carry codes or tokens.
    provider.on(event, (ctx: KoaContextWithOIDC, err: { error?: string; error_description?: string }) => {
      logger.warn(
        { event, error: err.error, description: err.error_description, clientId: ctx.oidc?.client?.clientId },
        'embedded IdP request rejected',
      );
    });
  }

  const pinned = new URL(issuer);
  const router = express.Router();
  router.use((req, _res, next) => {
    req.headers.host = pinned.host;
    req.headers['x-forwarded-host'] = pinned.host;
    req.headers['x-forwarded-proto'] = pinned.protocol.slice(0, -1);
    if (!opts.trustProxy) delete req.headers['x-forwarded-for'];
    next();
  });
  const throttle = createSigninThrottle({
    namespace: db.identity,
    logger,
    ...(opts.redis ? { redis: opts.redis } : {}),
    ...(opts.signinLockSeconds ? { lockSeconds: opts.signinLockSeconds } : {}),
    ...(opts.signinDelayMs ? { delayMs: opts.signinDelayMs } : {}),
  });
  const passkeys = passkeyService(db, relyingPartyOf(issuer));
  router.use(assetRoutes());
  router.use(
    interactionRoutes({ provider, db, basePath, logger, throttle, passkeys, accountUrl: `${basePath}/account` }),
  );
  router.use(
    accountRoutes({
      provider,
      db,
      passkeys,
      logger,
      basePath,
      origin: pinned.origin,
      publicUrl: opts.publicUrl,
      secret: secrets.cookieKeys[0]!,
      maxAgeSeconds: opts.factorChangeMaxAgeSeconds,
    }),
  );
  router.use('/me', twins.middleware());
  router.use(provider.callback());

  const sweep = () =>
    sweepExpiredModels(db).catch((err: unknown) => logger.warn({ err }, 'embedded IdP: sweeping expired state failed'));
  await sweep();
  const sweeper = setInterval(sweep, SWEEP_INTERVAL_MS);
  sweeper.unref();

  logger.info({ issuer }, 'embedded IdP ready');

  return {
    router,
    publicJwks: toPublicJwks(secrets.signingKeys),
    issuer,
    async close() {
      clearInterval(sweeper);
      provider.removeAllListeners();
    },
  };
}
