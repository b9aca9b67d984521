import { createHash, randomUUID } from 'node:crypto';
import { exportJWK, SignJWT, type JWK } from 'jose';
import * as client from 'openid-client';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';

export interface DpopSession {
  /** The DPoP-bound access token (its `cnf.jkt` is the thumbprint of `keyPair`'s public key). */
  readonly token: string;
  readonly tokenType: string;
  readonly keyPair: client.CryptoKeyPair;
  /** openid-client's configuration and DPoP handle, for fetchProtectedResource. */
  readonly config: client.Configuration;
  readonly handle: client.DPoPHandle;
}

/** Signs in through the embedded IdP's PKCE flow with openid-client's DPoP support: the token it returns is bound. */
export async function dpopLogin(
  issuer: string,
  user: 'alice' | 'bob' | 'carol',
  alg: 'ES256' | 'RS256' | 'PS256' | 'Ed25519' = 'ES256',
): Promise<DpopSession> {
  const keyPair = await client.randomDPoPKeyPair(alg);
  const result = await loginWithPkce({ issuer, username: user, password: user, dpopKeyPair: keyPair });
  return {
    token: result.accessToken,
    tokenType: result.tokenType,
    keyPair,
    config: result.config,
    handle: result.dpop!,
  };
}

/** openid-client's own request with a proof it makes itself: what a real DPoP client sends. */
export function fetchWithDpop(
  session: DpopSession,
  url: string,
  method: string,
  opts: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<Response> {
  const headers = new Headers(opts.headers);
  if (opts.body !== undefined) headers.set('content-type', 'application/json');
  return client.fetchProtectedResource(
    session.config,
    session.token,
    new URL(url),
    method,
    opts.body === undefined ? undefined : JSON.stringify(opts.body),
    headers,
    { DPoP: session.handle },
  );
}

export const ath = (token: string) => createHash('sha256').update(token).digest('base64url');

export interface ProofOptions {
  htm: string;
  htu: string;
  /** The access token the proof goes with (for `ath`). */
  token: string;
  /** Seconds since the epoch; now by default. */
  iat?: number;
  jti?: string;
  /** Claims to add, replace or (with undefined) remove. */
  claims?: Record<string, unknown>;
  /** Header members to add or replace (typ, alg, jwk). */
  header?: Record<string, unknown>;
  /** Signs with this key instead (the proof's jwk still names `keyPair`'s public key unless header.jwk says otherwise). */
  signWith?: client.CryptoKey | Uint8Array;
}

/** A hand-made proof, so each refusal test changes exactly one thing in an otherwise valid proof. */
export async function makeProof(keyPair: client.CryptoKeyPair, opts: ProofOptions): Promise<string> {
  const { kty, crv, x, y, n, e } = await exportJWK(keyPair.publicKey);
  const jwk = Object.fromEntries(Object.entries({ kty, crv, x, y, n, e }).filter(([, v]) => v !== undefined)) as JWK;
  const alg = algOf(keyPair.privateKey);
  const claims: Record<string, unknown> = {
    htm: opts.htm,
    htu: opts.htu,
    iat: opts.iat ?? Math.floor(Date.now() / 1000),
    jti: opts.jti ?? randomUUID(),
    ath: ath(opts.token),
    ...opts.claims,
  };
  for (const [k, v] of Object.entries(claims)) if (v === undefined) delete claims[k];
  return new SignJWT(claims)
    .setProtectedHeader({ typ: 'dpop+jwt', alg, jwk, ...opts.header } as never)
    .sign(opts.signWith ?? keyPair.privateKey);
}

/** A proof put together by hand, with whatever header and signature (none by default): for `alg: none` and keys no library signs with. */
export function rawProof(header: Record<string, unknown>, claims: Record<string, unknown>, signature = ''): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${b64(header)}.${b64(claims)}.${signature}`;
}

function algOf(key: client.CryptoKey): string {
  const algorithm = key.algorithm as { name: string; hash?: { name: string } };
  if (algorithm.name === 'ECDSA') return 'ES256';
  if (algorithm.name === 'RSA-PSS') return 'PS256';
  if (algorithm.name === 'RSASSA-PKCS1-v1_5') return 'RS256';
  return 'Ed25519';
}
