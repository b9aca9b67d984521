import { createHmac } from 'node:crypto';
import type { RequestHandler } from 'express';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import type { BaseToken, KoaContextWithOIDC } from 'oidc-provider';

/**
 * The userinfo endpoint for the API's access tokens.
 *
 * oidc-provider serves userinfo only to opaque access tokens without an audience, while every access token this
 * provider issues is a JWT for the orders API (so the API can verify it offline). Relying parties call userinfo with
 * the access token of their code flow, so each JWT access token gets a twin: an opaque userinfo token, saved when
 * the JWT is issued, with the grant's OpenID scopes the request asked for and the same lifetime and session binding.
 * A userinfo request bearing a JWT that verifies (signature, issuer, audience, expiry) is handed to oidc-provider
 * with its twin instead, so oidc-provider's own userinfo rules apply: openid scope, claims by scope, grant and
 * session still alive. The twin's value is an HMAC of the JWT's `jti` under a server secret, so knowing a `jti`
 * (which resource servers may log) is not enough to use it.
 */
export function userinfoTwins(opts: { secret: string; issuer: string; audience: string; publicJwks: JSONWebKeySet }) {
  const twinValue = (jti: string) => createHmac('sha256', opts.secret).update(`userinfo:${jti}`).digest('base64url');
  const keys = createLocalJWKSet(opts.publicJwks);

  return {
    /** Called from extraTokenClaims while an access token for the API is being issued. */
    async save(ctx: KoaContextWithOIDC, token: BaseToken): Promise<void> {
      // A sender-constrained token would need its DPoP proof to match the twin's value: userinfo stays refused.
      if (!token.resourceServer || !token.accountId || !token.grantId || token.jkt) return;
      const { Grant: grant, AuthorizationCode: code, RefreshToken: refresh } = ctx.oidc.entities ?? {};
      if (!grant) return;
      const requested = (code ?? refresh)?.scopes ?? new Set<string>();
      const scope = grant.getOIDCScopeFiltered(requested);
      if (!scope.split(' ').includes('openid')) return;
      const twin = new ctx.oidc.provider.AccessToken({
        jti: twinValue(token.jti),
        accountId: token.accountId,
        clientId: token.clientId,
        grantId: token.grantId,
        gty: token.gty,
        scope,
        claims: token.claims,
        sessionUid: token.sessionUid,
        expiresWithSession: token.expiresWithSession,
        sid: token.sid,
        expiresIn: token.expiration,
      });
      // oidc-provider picks the format when it generates an id; this id is given, so the format is too.
      twin.format = 'opaque';
      await twin.save();
    },

    /** Mounted on the userinfo path, before oidc-provider: swaps a verified API access token for its twin. */
    middleware(): RequestHandler {
      return async (req, _res, next) => {
        const bearer = /^Bearer ([\w-]+\.[\w-]+\.[\w-]+)$/i.exec(req.headers.authorization ?? '');
        if (!bearer) return next();
        try {
          const { payload } = await jwtVerify(bearer[1]!, keys, {
            issuer: opts.issuer,
            audience: opts.audience,
            typ: 'at+jwt',
            algorithms: ['RS256'],
            requiredClaims: ['exp', 'jti'],
            clockTolerance: 5,
          });
          if (!payload.cnf) req.headers.authorization = `Bearer ${twinValue(payload.jti!)}`;
        } catch {
          // Not one of ours, or no longer valid: oidc-provider refuses it as it refuses any unknown token.
        }
        next();
      };
    },
  };
}

export type UserinfoTwins = ReturnType<typeof userinfoTwins>;
