import { createLocalJWKSet } from 'jose';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { Database } from '../store/db.js';
import { databaseReplayStore, redisReplayStore } from '../store/dpopReplay.js';
import { sweepExpiredModels } from '../store/idp.js';
import { reportAcrSupport } from './acrSupport.js';
import { createTokenVerifier, discoveredJwks, type TokenVerifier } from './bearer.js';
import { browserLoginFor } from './browserLogin.js';
import { createAuthentication, sessionsAdmittedBy, type DirectoryGate } from './credentials.js';
import { createDpopProofVerifier } from './dpop.js';
import type { EmbeddedIdpOptions } from './embeddedIdp.js';
import { createSessionStore, deleteExpiredSessions } from './sessions.js';

/**
 * Authentication, assembled: the issuer (the embedded IdP when none is configured), token verification (Bearer and
 * DPoP, its proof ids seen by every replica), browser sessions, and the one authentication each transport uses.
 */
export async function createAuth(deps: {
  config: Config;
  db: Database;
  redis?: Redis;
  logger: Logger;
  /** The directory's verdicts, applied after every credential is verified. */
  directory: DirectoryGate;
  /** The session cookie's name (the browser transport names its cookies). */
  sessionCookie: string;
  /** What every verified credential also passes through (webhooks note their owners' roles). */
  noting?: (verifier: TokenVerifier) => TokenVerifier;
}) {
  const { config, db, redis, logger, directory } = deps;
  const idp = config.oidc.issuer
    ? null
    : await startEmbeddedIdp({
        issuer: `${config.publicUrl}/idp`,
        publicUrl: config.publicUrl,
        db,
        audience: config.oidc.audience,
        trustProxy: config.trustProxy !== false,
        logger: logger.child({ component: 'idp' }),
        redis,
        signinLockSeconds: config.signin.lockSeconds,
        // Changing factors needs a sign-in as recent as a staff change does.
        factorChangeMaxAgeSeconds: config.stepUp?.maxAgeSeconds,
        nodeEnv: config.nodeEnv,
      });
  const issuer = config.oidc.issuer ?? idp!.issuer;
  // The embedded IdP issues the step-up levels itself; an external one is asked (its metadata) once, at start.
  const acrSupportChecked =
    config.oidc.issuer && config.stepUp
      ? reportAcrSupport(config.oidc.issuer, config.stepUp.acrValues, logger)
      : Promise.resolve();
  // Used DPoP proof ids must be seen by every replica: Redis when there is one, else the shared database.
  const proofReplay = redis ? redisReplayStore(redis) : databaseReplayStore(db);
  const tokens = createTokenVerifier({
    issuer,
    audience: config.oidc.audience,
    rolesClaim: config.oidc.rolesClaim,
    linkClaim: config.scim.linkClaim,
    // The embedded provider's keys are at hand; any other issuer's come from its discovery document.
    keys: idp ? createLocalJWKSet(idp.publicJwks) : discoveredJwks(issuer, config.oidc.jwksMaxAgeSeconds * 1000),
    dpop: createDpopProofVerifier({ publicUrl: config.publicUrl, replay: proofReplay }),
  });
  const verifier = deps.noting ? deps.noting(tokens) : tokens;
  const sessionStore = createSessionStore(db, { loginAttemptsPerIp: config.loginAttemptsPerIp });
  const sessions = sessionsAdmittedBy(sessionStore, directory);
  return {
    idp,
    issuer,
    verifier,
    /** Sessions as stored (the stream registry asks which are still live). */
    sessionStore,
    /** Sessions as the directory admits them: a deactivated person's session no longer signs anyone in. */
    sessions,
    // The session cookie authenticates GraphQL on every transport; REST stays token-only. Streams it opens end with
    // the session (logout, expiry, revocation) through the stream registry, so the principal carries no end.
    callers: createAuthentication(
      verifier,
      { cookieName: deps.sessionCookie, lookup: async (id: string) => (await sessions.touch(id))?.user ?? null },
      directory,
    ),
    tokensOnly: createAuthentication(verifier, undefined, directory),
    /** The directory's own client (SCIM), which the directory does not judge. */
    directoryClient: createAuthentication(verifier),
    login: browserLoginFor(config, issuer, verifier),
    /** The expired rows auth keeps (sessions, and the embedded IdP's state when it runs), for the one sweeper. */
    sweeps: { sessions: deleteExpiredSessions, ...(idp ? { idpState: sweepExpiredModels } : {}) },
    /** Settles once an external issuer's support for the step-up acr values has been checked (and logged). */
    acrSupportChecked,
    async close() {
      await idp?.close();
      proofReplay.close();
    },
  };
}

export type Auth = Awaited<ReturnType<typeof createAuth>>;
export type { TokenVerifier };

/** Loaded on demand: with an external issuer (always so in production) oidc-provider is never imported. */
async function startEmbeddedIdp({
  nodeEnv,
  ...opts
}: Omit<EmbeddedIdpOptions, 'passwordHashing' | 'signinDelayMs'> & { nodeEnv: Config['nodeEnv'] }) {
  // One after the other: Jest's ESM linker fails when two dynamic imports race to link a module they share.
  const { createEmbeddedIdp } = await import('./embeddedIdp.js');
  const { argon2Params } = await import('./idp/users.js');
  const { signinDelayMs } = await import('./idp/signinThrottle.js');
  return createEmbeddedIdp({
    ...opts,
    passwordHashing: argon2Params(nodeEnv),
    signinDelayMs: signinDelayMs(nodeEnv),
  });
}
