import { randomBytes } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair } from 'jose';
import type { JSONWebKeySet, JWK } from 'jose';
import type { Database } from '../../store/db.js';
import { insertIdpKeys, readIdpKeys } from '../../store/idp.js';

export interface IdpSecrets {
  /** Private signing keys, each with kid, alg and use. */
  readonly signingKeys: JWK[];
  /** Secrets oidc-provider signs its cookies with. */
  readonly cookieKeys: string[];
}

const PUBLIC_MEMBERS: Record<string, readonly string[]> = {
  RSA: ['kty', 'n', 'e'],
  EC: ['kty', 'crv', 'x', 'y'],
};

/**
 * Loads the provider's keys, generating them on first start. Keys live in the database so a restart keeps
 * issued tokens valid, and every replica signs with and publishes the same keys.
 */
export async function loadOrCreateSecrets(db: Database): Promise<IdpSecrets> {
  const existing = await readSecrets(db);
  if (existing) return existing;

  const generated = {
    keys: [await generateSigningKey('RS256'), await generateSigningKey('ES256')],
    cookieKeys: [randomBytes(32).toString('base64url')],
  };
  // Replicas starting together may both get here; the first insert wins and everyone re-reads it.
  await insertIdpKeys(db, generated);
  const stored = await readSecrets(db);
  if (!stored) throw new Error('embedded IdP: signing keys could not be stored');
  return stored;
}

/** The public halves of the signing keys, safe to publish and to verify access tokens with. */
export function toPublicJwks(signingKeys: readonly JWK[]): JSONWebKeySet {
  return {
    keys: signingKeys.map((key) => {
      const members = PUBLIC_MEMBERS[key.kty ?? ''];
      if (!members) throw new Error(`embedded IdP: unsupported signing key type ${String(key.kty)}`);
      const fields = key as Record<string, unknown>;
      return { ...Object.fromEntries(members.map((m) => [m, fields[m]])), kid: key.kid, alg: key.alg, use: 'sig' };
    }),
  };
}

async function generateSigningKey(alg: 'RS256' | 'ES256'): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, kid: await calculateJwkThumbprint(jwk), alg, use: 'sig' };
}

async function readSecrets(db: Database): Promise<IdpSecrets | undefined> {
  const stored = await readIdpKeys(db);
  return stored && { signingKeys: stored.keys, cookieKeys: stored.cookieKeys };
}
