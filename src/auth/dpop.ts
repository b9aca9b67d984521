import { createHash } from 'node:crypto';
import { calculateJwkThumbprint, decodeProtectedHeader, importJWK, jwtVerify, type JWK, type JWTPayload } from 'jose';
import type { ProofReplayStore } from '../domain/ports.js';
import { normalizedUri } from './uriNormalization.js';

/**
 * Proof signature algorithms, asymmetric only (RFC 9449 §4.3 step 5): ES256, RS256, PS256 and EdDSA as asked
 * for, plus Ed25519, the fully-specified name (RFC 9864) for the same EdDSA key that openid-client now emits.
 */
export const DPOP_ALGORITHMS = ['ES256', 'RS256', 'PS256', 'EdDSA', 'Ed25519'] as const;

/** A proof is accepted while its `iat` is at most this far from the server's clock, either way. */
export const DPOP_IAT_WINDOW_S = 60;

/** An RSA-4096 proof is about 2.5 kB; anything longer is not a proof we would accept. */
const MAX_PROOF_LENGTH = 4096;
/** RSA public keys up to 4096 bits with a small exponent, so one verification costs what a normal one does. */
const MAX_RSA_MODULUS_CHARS = 683;
const MAX_RSA_EXPONENT_CHARS = 6;
const MAX_JTI_LENGTH = 256;
const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/** The proof is missing or does not prove what it must: answered with `error="invalid_dpop_proof"`. */
export class InvalidDpopProofError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidDpopProofError';
  }
}

export interface ProofContext {
  /** The HTTP method of the request. */
  readonly method: string;
  /** The request target as received (path and query); it is compared against PUBLIC_URL + path. */
  readonly path: string;
  /** The access token presented with the proof, to check `ath`. */
  readonly accessToken: string;
  /** The thumbprint the access token is bound to (`cnf.jkt`). */
  readonly jkt: string;
}

export interface DpopProofVerifier {
  /** Resolves when `proof` is a fresh, unused proof for this request made with the token's key. */
  verify(proof: string | undefined, request: ProofContext): Promise<void>;
}

/** RFC 9449 §4.3 htu comparison: an http(s) URI normalized as RFC 3986 §6.2.2-6.2.3 say, without query or fragment. */
function normalizedHtu(value: string): string | null {
  const url = normalizedUri(value);
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) return null;
  return `${url.origin}${url.pathname}`;
}

const sha256 = (value: string) => createHash('sha256').update(value).digest('base64url');

function checkedJwk(header: { jwk?: unknown }): JWK {
  const jwk = header.jwk;
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) {
    throw new InvalidDpopProofError('The DPoP proof header carries no jwk.');
  }
  const key = jwk as Record<string, unknown>;
  if (PRIVATE_JWK_MEMBERS.some((member) => member in key)) {
    throw new InvalidDpopProofError('The DPoP proof jwk must be a public key.');
  }
  if (
    key.kty === 'RSA' &&
    (typeof key.n !== 'string' ||
      key.n.length > MAX_RSA_MODULUS_CHARS ||
      typeof key.e !== 'string' ||
      key.e.length > MAX_RSA_EXPONENT_CHARS)
  ) {
    throw new InvalidDpopProofError('The DPoP proof RSA key must be at most 4096 bits with a small exponent.');
  }
  return key as JWK;
}

/**
 * Checks DPoP proofs at the resource server (RFC 9449 §4.3 and §7.1). `publicUrl` is how clients reach this
 * API (PUBLIC_URL), so `htu` matches behind a proxy that rewrites the host or the scheme.
 */
export function createDpopProofVerifier(opts: { publicUrl: string; replay: ProofReplayStore }): DpopProofVerifier {
  const base = opts.publicUrl.replace(/\/+$/, '');
  const algorithms: string[] = [...DPOP_ALGORITHMS];

  return {
    async verify(proof, request) {
      if (proof === undefined) throw new InvalidDpopProofError('A DPoP-bound access token needs a DPoP proof header.');
      if (proof.length > MAX_PROOF_LENGTH) throw new InvalidDpopProofError('The DPoP proof is too long.');

      let header: ReturnType<typeof decodeProtectedHeader>;
      try {
        header = decodeProtectedHeader(proof);
      } catch {
        throw new InvalidDpopProofError('The DPoP proof is not a JWT.');
      }
      if (header.typ !== 'dpop+jwt') throw new InvalidDpopProofError('The DPoP proof typ must be dpop+jwt.');
      if (typeof header.alg !== 'string' || !algorithms.includes(header.alg)) {
        throw new InvalidDpopProofError(`The DPoP proof alg must be one of ${algorithms.join(', ')}.`);
      }
      const jwk = checkedJwk(header);
      // The cheap binding check first: a proof made with some other key is refused before any signature work.
      let thumbprint: string;
      try {
        thumbprint = await calculateJwkThumbprint(jwk, 'sha256');
      } catch {
        throw new InvalidDpopProofError('The DPoP proof jwk is not a valid public key.');
      }
      if (thumbprint !== request.jkt) {
        throw new InvalidDpopProofError('The DPoP proof key is not the key the access token is bound to.');
      }

      let payload: JWTPayload;
      try {
        const key = await importJWK(jwk, header.alg);
        ({ payload } = await jwtVerify(proof, key, { typ: 'dpop+jwt', algorithms }));
      } catch {
        // Whatever fails here fails on the client's key or signature (jose, or WebCrypto for a bad curve point).
        throw new InvalidDpopProofError('The DPoP proof signature is not valid.');
      }

      const { htm, htu, iat, jti, ath } = payload as Record<string, unknown>;
      if (htm !== request.method) throw new InvalidDpopProofError(`The DPoP proof htm must be ${request.method}.`);
      const expected = normalizedHtu(base + request.path.replace(/[?#].*$/s, ''));
      if (typeof htu !== 'string' || expected === null || normalizedHtu(htu) !== expected) {
        throw new InvalidDpopProofError(`The DPoP proof htu must be ${expected ?? 'this request URL'}.`);
      }
      const now = Date.now() / 1000;
      if (typeof iat !== 'number' || !Number.isFinite(iat) || Math.abs(now - iat) > DPOP_IAT_WINDOW_S) {
        throw new InvalidDpopProofError(`The DPoP proof iat must be within ${DPOP_IAT_WINDOW_S} s of now.`);
      }
      if (ath !== sha256(request.accessToken)) {
        throw new InvalidDpopProofError('The DPoP proof ath does not match the access token.');
      }
      if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH) {
        throw new InvalidDpopProofError(`The DPoP proof needs a jti of 1 to ${MAX_JTI_LENGTH} characters.`);
      }
      // Last, so only a proof that is valid in every other way is remembered; it is remembered until
      // it would be too old anyway. Keyed by key and jti, so two clients' ids never collide.
      const expiresAt = new Date((iat + DPOP_IAT_WINDOW_S + 1) * 1000);
      if (!(await opts.replay.claim(sha256(`${thumbprint}.${jti}`), expiresAt))) {
        throw new InvalidDpopProofError('The DPoP proof was already used; make a new one for each request.');
      }
    },
  };
}
