import express from 'express';
import type { Router } from 'express';
import type { Redis } from 'ioredis';
import type { JSONWebKeySet } from 'jose';
import type { Logger } from 'pino';
import Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { Database } from '../store/db.js';
import { accountRoutes } from './idp/account.js';
import { assetRoutes } from './idp/assets.js';
import { allowLoopbackReplicas } from './idp/clients.js';
import { interactionRoutes } from './idp/interactions.js';
import { passkeyService, relyingPartyOf } from './idp/passkeys.js';
import { providerConfiguration } from './idp/providerPolicy.js';
import { loadOrCreateSecrets, toPublicJwks } from './idp/keys.js';
import { createSigninThrottle } from './idp/signinThrottle.js';
import { seedDemoTotp } from './idp/totp.js';
import { userinfoTwins } from './idp/userinfo.js';
import { seedDemoUsers, type Argon2Params } from './idp/users.js';

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

  const twins = userinfoTwins({
    secret: secrets.cookieKeys[0]!,
    issuer,
    audience,
    publicJwks: toPublicJwks(secrets.signingKeys),
  });

  const configuration = providerConfiguration({
    db,
    basePath,
    audience,
    publicUrl: opts.publicUrl,
    secrets,
    twins,
  });

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

  logger.info({ issuer }, 'embedded IdP ready');

  return {
    router,
    publicJwks: toPublicJwks(secrets.signingKeys),
    issuer,
    async close() {
      provider.removeAllListeners();
    },
  };
}
