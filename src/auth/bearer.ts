import {
  createRemoteJWKSet,
  decodeProtectedHeader,
  errors as joseErrors,
  jwksCache,
  jwtVerify,
  type ExportedJWKSCache,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
} from 'jose';
import { LRUCache } from 'lru-cache';
import type { User } from '../domain/policy.js';
import type { DpopProofVerifier } from './dpop.js';

/** Asymmetric algorithms only: a JWKS never holds shared secrets, and `none` is never accepted. */
export const ALLOWED_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'EdDSA'];

/** Verified tokens remembered per process; the least recently used is dropped first. */
const VERIFIED_CACHE_SIZE = 10_000;
/** jose's default: after a JWKS fetch, an unknown key id does not fetch it again for this long. */
const JWKS_COOLDOWN_MS = 30_000;

/**
 * Where the issuer's keys come from: jose's key lookup and, for a JWKS fetched from the issuer, whether it is still
 * fresh and the key set as last fetched (a new object after every fetch), so that tokens verified earlier can be held
 * to the keys the issuer publishes now. Keys given once (the embedded IdP's) have neither.
 */
export type IssuerKeys = JWTVerifyGetKey & {
  readonly fresh?: boolean;
  lastFetched?(): JSONWebKeySet | undefined;
};

export class InvalidTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidTokenError';
  }
}

/**
 * A DPoP-bound token (one with `cnf.jkt`) presented as a Bearer token: refused, or a stolen bound token would
 * work without its key (RFC 9449 §7.2).
 */
export class BoundTokenError extends InvalidTokenError {
  constructor() {
    super('The access token is DPoP-bound; send it as Authorization: DPoP with a DPoP proof.');
    this.name = 'BoundTokenError';
  }
}

/** How a request presents its access token: RFC 6750 Bearer, or RFC 9449 DPoP with the request's proof. */
export type Presentation =
  | { readonly scheme: 'bearer' }
  | { readonly scheme: 'dpop'; readonly proof: string | undefined; readonly method: string; readonly path: string };

export interface TokenVerifier {
  /**
   * Resolves to the caller, or rejects with InvalidTokenError (BoundTokenError for a bound token sent as
   * Bearer) or, for a DPoP presentation, InvalidDpopProofError.
   */
  verify(token: string, presentation?: Presentation): Promise<User>;
}

/** Reads a dotted claim path such as `realm_access.roles` (Keycloak). */
export function claimAt(payload: JWTPayload, path: string): unknown {
  let value: unknown = payload;
  for (const part of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

export function stringList(value: unknown): string[] {
  if (typeof value === 'string') return value.split(' ').filter(Boolean);
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}

/**
 * How the user signed in, as the issuer says in the token (RFC 9068 §2.2.1, OpenID Connect Core §2): `acr`, `amr`
 * (RFC 8176) and `auth_time`. The ID token of a browser session says it the same way. Malformed values are ignored,
 * so the credential counts as a sign-in of unknown strength.
 */
export function signInOf(claims: JWTPayload): Pick<User, 'acr' | 'amr' | 'authTime'> {
  const { acr, amr, auth_time: authTime } = claims;
  return {
    ...(typeof acr === 'string' && acr ? { acr } : {}),
    ...(Array.isArray(amr) ? { amr: amr.filter((m): m is string => typeof m === 'string') } : {}),
    ...(typeof authTime === 'number' && Number.isFinite(authTime) ? { authTime: authTime * 1000 } : {}),
  };
}

/**
 * Discovers `jwks_uri` lazily and retries after a failure, so a late issuer does not stop start-up. The JWKS is fetched
 * again once it is `maxAgeMs` old, and on an unknown key id at most every 30 s (or `maxAgeMs`, if shorter).
 */
export function discoveredJwks(issuer: string, maxAgeMs = 600_000): IssuerKeys {
  let keySet: Promise<ReturnType<typeof createRemoteJWKSet>> | null = null;
  let discovered: ReturnType<typeof createRemoteJWKSet> | undefined;
  // jose writes each JWKS it fetches and applies here.
  const fetched: Partial<ExportedJWKSCache> = {};
  const discover = async () => {
    const res = await fetch(`${issuer}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) throw new Error(`discovery answered ${res.status}`);
    const meta = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
    if (meta.issuer !== issuer) throw new Error('discovery document names another issuer');
    if (typeof meta.jwks_uri !== 'string') throw new Error('discovery document has no jwks_uri');
    discovered = createRemoteJWKSet(new URL(meta.jwks_uri), {
      cacheMaxAge: maxAgeMs,
      cooldownDuration: Math.min(JWKS_COOLDOWN_MS, maxAgeMs),
      [jwksCache]: fetched as Record<string, never>,
    });
    return discovered;
  };
  const getKey: JWTVerifyGetKey = async (header, token) => {
    keySet ??= discover().catch((error: unknown) => {
      keySet = null;
      throw error;
    });
    return (await keySet)(header, token);
  };
  return Object.defineProperties(getKey, {
    fresh: { get: () => discovered?.fresh ?? false },
    lastFetched: { value: () => fetched.jwks },
  }) as IssuerKeys;
}

/** The key ids of a key set; a key without one stands as ''. */
const kidsOf = (jwks: JSONWebKeySet) => new Set(jwks.keys.map((k) => k.kid ?? ''));

interface VerifiedToken {
  readonly principal: User;
  /** The id of the key that verified it ('' when the token names none). */
  readonly kid: string;
  /** The RFC 7638 thumbprint of the key the token is bound to (`cnf.jkt`, RFC 9449 §6.1). */
  readonly jkt?: string;
  readonly notBefore?: number;
}

/** `cnf.jkt`; any other `cnf` content is a binding this API cannot check, so it refuses the token. */
function boundThumbprint(payload: JWTPayload): string | undefined {
  if (payload.cnf === undefined) return undefined;
  const jkt = (payload.cnf as { jkt?: unknown } | null)?.jkt;
  if (typeof jkt !== 'string' || jkt.length === 0) {
    throw new InvalidTokenError('The access token is bound to a key in a way this API cannot check.');
  }
  return jkt;
}

export function createTokenVerifier(opts: {
  issuer: string;
  audience: string;
  rolesClaim: string;
  /** SCIM_LINK_CLAIM: the claim whose value is the caller's directory key (`sub` unless told). */
  linkClaim?: string;
  keys: IssuerKeys;
  /** Checks the proofs of DPoP-bound tokens; without it, every DPoP presentation is refused. */
  dpop?: DpopProofVerifier;
}): TokenVerifier {
  // A token that verified once stays valid until it expires (JWTs cannot be revoked), so checking its signature
  // again on every request is wasted work. Remembered by the token itself (an exact match: hashing it with SHA-256
  // costs a visible share of a small request, bench/README.md, and a shorter or non-cryptographic key would let a
  // forged token find a genuine one's entry), bounded and least recently used first out, with what verifying it found: the
  // caller (with acr, amr and auth_time, for step-up), the key id and the DPoP binding. A hit is trusted only while
  // - the token has not expired: never past `exp`, whatever the clock tolerance allows a first sight;
  // - the issuer's JWKS as last fetched is fresh (an external issuer's: OIDC_JWKS_MAX_AGE_S); a stale one means
  //   verifying again, which fetches it again;
  // - its key is still in that JWKS: whenever a fetch changes the key set, the tokens of keys that left it are
  //   forgotten, so they verify again, and fail.
  // What the directory says (a deactivated person, the staff role) is not cached here: authentication asks it on
  // every request (credentials.ts). The binding is cached with the token, so a hit is held to its proof exactly as a
  // first sight is.
  const verified = new LRUCache<string, VerifiedToken>({ max: VERIFIED_CACHE_SIZE });
  let knownJwks: JSONWebKeySet | undefined;
  let knownKids: ReadonlySet<string> | undefined;
  /** Follows the key set: when it has changed since last seen, forgets the tokens of keys no longer in it. */
  function followKeySet() {
    const jwks = opts.keys.lastFetched?.();
    if (jwks === knownJwks) return;
    const first = knownJwks === undefined;
    knownJwks = jwks;
    knownKids = jwks && kidsOf(jwks);
    if (first || !knownKids) return;
    for (const [token, entry] of verified.entries()) {
      if (!entry.kid || !knownKids.has(entry.kid)) verified.delete(token);
    }
  }
  return {
    async verify(token, presentation = { scheme: 'bearer' }) {
      const { principal, jkt } = await verifiedToken(token);
      if (presentation.scheme === 'bearer') {
        if (jkt !== undefined) throw new BoundTokenError();
        return principal;
      }
      if (jkt === undefined) throw new InvalidTokenError('The access token is not DPoP-bound; send it as Bearer.');
      if (!opts.dpop) throw new InvalidTokenError('DPoP-bound access tokens are not accepted here.');
      await opts.dpop.verify(presentation.proof, { ...presentation, accessToken: token, jkt });
      return principal;
    },
  };

  async function verifiedToken(token: string): Promise<VerifiedToken> {
    const hit = verified.get(token);
    if (hit) {
      if (opts.keys.fresh !== false) followKeySet();
      if (
        hit.principal.expiresAt! > Date.now() &&
        opts.keys.fresh !== false &&
        (knownKids === undefined || knownKids.has(hit.kid))
      ) {
        return hit;
      }
      verified.delete(token);
    }
    const result = await verifyToken(token);
    // Verifying may have fetched the issuer's JWKS again.
    followKeySet();
    // A token that is not yet valid (nbf) is never cached, so it is checked again next time.
    if (result.notBefore === undefined || result.notBefore <= Date.now()) verified.set(token, result);
    return result;
  }

  async function verifyToken(token: string): Promise<VerifiedToken> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, opts.keys, {
        issuer: opts.issuer,
        audience: opts.audience,
        algorithms: ALLOWED_ALGORITHMS,
        // jose accepts a token without `exp` unless told otherwise; a token must expire.
        requiredClaims: ['exp', 'sub'],
        clockTolerance: 5,
      }));
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) throw new InvalidTokenError('The access token has expired.');
      if (error instanceof joseErrors.JOSEError) throw new InvalidTokenError('The access token is not valid.');
      throw error;
    }
    const name = typeof payload.name === 'string' ? payload.name : undefined;
    const email = typeof payload.email === 'string' ? payload.email : undefined;
    const clientId = [payload.client_id, payload.azp].find((v): v is string => typeof v === 'string');
    const directoryKey = claimAt(payload, opts.linkClaim ?? 'sub');
    const principal: User = {
      ...signInOf(payload),
      kind: 'user',
      subject: payload.sub!,
      // RFC 9068 puts scopes in `scope`; some issuers use an `scp` array instead.
      scopes: new Set(stringList(payload.scope ?? payload.scp)),
      roles: new Set(stringList(claimAt(payload, opts.rolesClaim))),
      ...(name ? { name } : {}),
      ...(email ? { email } : {}),
      ...(clientId ? { clientId } : {}),
      expiresAt: payload.exp! * 1000,
      ...(typeof payload.iat === 'number' ? { issuedAt: payload.iat * 1000 } : {}),
      ...(typeof directoryKey === 'string' && directoryKey ? { directoryKey } : {}),
    };
    const jkt = boundThumbprint(payload);
    const { kid } = decodeProtectedHeader(token);
    return {
      principal,
      kid: typeof kid === 'string' ? kid : '',
      ...(jkt !== undefined ? { jkt } : {}),
      ...(payload.nbf !== undefined ? { notBefore: payload.nbf * 1000 } : {}),
    };
  }
}
