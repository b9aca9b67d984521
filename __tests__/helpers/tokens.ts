import { importJWK, SignJWT, type JWK } from 'jose';
import type { TestServer } from './server.js';

/**
 * An access token as the server's embedded IdP would issue it (its RS256 key, issuer and audience), for `sub`, that
 * expires `expiresIn` seconds from now (negative: already expired, issued a second before it expired).
 */
export async function idpSignedToken(
  server: TestServer,
  /** `claims` adds to or replaces the token's claims (`roles`, `iat`, `acr`, `auth_time`…). */
  opts: { sub: string; expiresIn: number; scope?: string; claims?: Record<string, unknown> },
): Promise<string> {
  const [row] = await server.running.app.db.query<{ jwks: { keys: JWK[] } }>('select jwks from idp_keys');
  const key = row!.jwks.keys.find((k) => k.alg === 'RS256')!;
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: server.running.app.issuer,
    aud: 'orders-api',
    sub: opts.sub,
    iat: Math.min(now, now + opts.expiresIn - 1),
    exp: now + opts.expiresIn,
    scope: opts.scope ?? 'orders:read orders:write',
    roles: [],
    ...opts.claims,
  })
    .setProtectedHeader({ alg: 'RS256', kid: key.kid!, typ: 'at+jwt' })
    .sign(await importJWK(key, 'RS256'));
}
