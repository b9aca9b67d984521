import { createHash } from 'node:crypto';
import { errors, interactionPolicy } from 'oidc-provider';
import type { Configuration, KoaContextWithOIDC } from 'oidc-provider';
import { ACR } from '../../domain/policy.js';
import type { Database } from '../../store/db.js';
import { PostgresAdapter } from '../../store/idp.js';
import { normalizedUri } from '../uriNormalization.js';
import { DIRECTORY_CLIENT_ID, DIRECTORY_SCOPE, FIRST_PARTY_CLIENTS, clientMetadata } from './clients.js';
import type { IdpSecrets } from './keys.js';
import { AUTO_SIGN_OUT_SCRIPT, errorPage, loggedOutPage, logoutPage, signingOutPage } from './pages.js';
import { satisfies } from './signInMethods.js';
import type { UserinfoTwins } from './userinfo.js';
import { findUserBySubject } from './users.js';

/** Scopes of the orders API, granted on its resource server. */
const API_SCOPES = 'orders:read orders:write';
const HOUR = 60 * 60;
const DAY = 24 * HOUR;

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
 * The embedded provider's policy, apart from mounting it (embeddedIdp.ts): its clients, keys and cookies, scopes and
 * claims, the interactions and their step-up checks, the pages it renders, token lifetimes and the one resource server
 * it issues access tokens for.
 */
export function providerConfiguration({
  db,
  basePath,
  audience,
  publicUrl,
  secrets,
  twins,
}: {
  db: Database;
  basePath: string;
  audience: string;
  publicUrl: string;
  secrets: IdpSecrets;
  twins: UserinfoTwins;
}): Configuration {
  // Resource indicators must be absolute URIs (RFC 8707 §2); a bare audience such as 'orders-api' becomes a URN. The
  // API's own URL (PUBLIC_URL) names the same resource server: it is what clients that follow RFC 8707 send.
  const resourceIndicator = URL.canParse(audience) ? audience : `urn:${encodeURIComponent(audience)}`;
  const apiUrl = publicUrl.replace(/\/+$/, '');
  const apiResources = [...new Set([resourceIndicator, apiUrl])];
  // Indicators are compared as URIs, not strings (RFC 3986 §6.2): `http://host:4150/` names what `http://host:4150`
  // does, and `new URL()` adds that slash.
  const apiResourceUris = new Set(apiResources.map((r) => normalizedUri(r)?.href));
  const isApiResource = (indicator: string) => apiResourceUris.has(normalizedUri(indicator)?.href ?? '');
  return {
    adapter: (model) => new PostgresAdapter(db, model),
    clients: clientMetadata(publicUrl),
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
}
