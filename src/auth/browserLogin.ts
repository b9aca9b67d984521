import * as client from 'openid-client';
import type { Config } from '../config/index.js';
import { InvalidTokenError, claimAt, signInOf, stringList, type TokenVerifier } from './bearer.js';
import { WEB_CLIENT_ID, WEB_CLIENT_SECRET } from './idp/clients.js';
import type { LoginAttempt, NewSession } from './sessions.js';

/** OpenID scopes for who the person is, and the API's scopes for what the session may do. */
export const LOGIN_SCOPE = 'openid email profile orders:read orders:write';
const TIMEOUT_SECONDS = 10;

export interface BrowserLoginOptions {
  readonly issuer: string;
  readonly clientId: string;
  /** Absent for a public client. */
  readonly clientSecret?: string;
  /** `${PUBLIC_URL}/auth/callback`, registered at the issuer. */
  readonly redirectUri: string;
  /** Where the issuer sends the browser after signing out: `${PUBLIC_URL}/`. */
  readonly postLogoutRedirectUri: string;
  /** Plain-http issuers are accepted only outside production (the embedded one on localhost). */
  readonly allowInsecureRequests: boolean;
  /** The API's own access-token verifier: a session gets the scopes and roles a Bearer caller would. */
  readonly verifier: TokenVerifier;
  readonly rolesClaim: string;
  /** SCIM_LINK_CLAIM: the session keeps its value, so a deactivation at the directory can find it. */
  readonly linkClaim?: string;
}

/** The issuer (or its answer) says no, or the answer fails a check: never a session. */
export class LoginRejected extends Error {
  constructor(
    message: string,
    /** For the log: an OAuth error code or openid-client's check that failed; never a token or parameter value. */
    readonly reason: string,
  ) {
    super(message);
    this.name = 'LoginRejected';
  }
}

/** The issuer cannot be reached (or discovered) right now. */
export class IssuerUnavailable extends Error {
  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
    this.name = 'IssuerUnavailable';
  }
}

function describe(error: unknown): string {
  if (error instanceof client.AuthorizationResponseError || error instanceof client.ResponseBodyError) {
    return error.error;
  }
  const { name, code, message, cause } = error as { name?: string; code?: unknown; message?: string; cause?: unknown };
  // oauth4webapi's messages name the failed check (never a value); openid-client wraps them as the cause.
  const detail = cause instanceof Error ? cause.message : undefined;
  return [name, typeof code === 'string' ? code : undefined, message, detail].filter(Boolean).join(': ');
}

/** Network failures and timeouts, as opposed to an answer that failed a check. */
function isTransportFailure(error: unknown): boolean {
  const { name, code } = error as { name?: string; code?: unknown };
  return (error instanceof TypeError && code === undefined) || name === 'AbortError' || name === 'TimeoutError';
}

/**
 * The relying-party side of browser sign-in (authorization code + PKCE, OpenID Connect Core §3.1) with
 * openid-client. The issuer is discovered on first use, not at start-up: the embedded one is served by this very
 * process, and an external one may come up after the API.
 */
export function createBrowserLogin(opts: BrowserLoginOptions) {
  let discovered: Promise<client.Configuration> | null = null;

  function configuration(): Promise<client.Configuration> {
    discovered ??= client
      .discovery(
        new URL(opts.issuer),
        opts.clientId,
        undefined,
        opts.clientSecret ? client.ClientSecretBasic(opts.clientSecret) : client.None(),
        {
          timeout: TIMEOUT_SECONDS,
          execute: [
            ...(opts.allowInsecureRequests ? [client.allowInsecureRequests] : []),
            // The ID token comes straight from the token endpoint, yet its signature is checked too.
            client.enableNonRepudiationChecks,
          ],
        },
      )
      .catch((error: unknown) => {
        // Retried on the next sign-in rather than remembered as broken.
        discovered = null;
        throw new IssuerUnavailable('The identity provider cannot be reached right now.', describe(error));
      });
    return discovered;
  }

  async function sessionFrom(tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers) {
    const claims = tokens.claims();
    if (!claims) throw new LoginRejected('The identity provider sent no ID token.', 'id_token missing');
    // The access token is what a Bearer caller would present; where it verifies for this API, the session
    // gets exactly its scopes and roles. Otherwise (opaque, or for another audience) the ID token's.
    let fromAccessToken = null;
    try {
      fromAccessToken = await opts.verifier.verify(tokens.access_token);
    } catch (error) {
      if (!(error instanceof InvalidTokenError)) throw error;
    }
    const user = fromAccessToken?.subject === claims.sub ? fromAccessToken : null;
    const name = typeof claims.name === 'string' ? claims.name : user?.name;
    const email = typeof claims.email === 'string' ? claims.email : user?.email;
    const linked = user?.directoryKey ?? claimAt(claims, opts.linkClaim ?? 'sub');
    const directoryKey = typeof linked === 'string' && linked ? linked : undefined;
    const session: NewSession = {
      subject: claims.sub,
      roles: user ? [...user.roles] : stringList(claimAt(claims, opts.rolesClaim)),
      scopes: user ? [...user.scopes] : stringList(tokens.scope),
      ...(name ? { name } : {}),
      ...(email ? { email } : {}),
      ...(tokens.id_token ? { idToken: tokens.id_token } : {}),
      ...(directoryKey ? { directoryKey } : {}),
      // The ID token is the statement about the sign-in itself (OpenID Connect Core §2).
      ...signInOf(claims),
    };
    return session;
  }

  return {
    /**
     * A fresh state, nonce and PKCE verifier for one attempt, and the authorization URL that carries them. A step-up
     * (RFC 9470 §4) asks for `acr_values` and `max_age` too.
     */
    async start(
      stepUp: { readonly acrValues?: string; readonly maxAge?: number } = {},
    ): Promise<{ authorizationUrl: URL; attempt: Omit<LoginAttempt, 'returnTo'> }> {
      const config = await configuration();
      const attempt = {
        state: client.randomState(),
        nonce: client.randomNonce(),
        codeVerifier: client.randomPKCECodeVerifier(),
      };
      const authorizationUrl = client.buildAuthorizationUrl(config, {
        response_type: 'code',
        redirect_uri: opts.redirectUri,
        scope: LOGIN_SCOPE,
        state: attempt.state,
        nonce: attempt.nonce,
        // Only the S256 challenge leaves the server; the verifier goes to the token endpoint alone.
        code_challenge: await client.calculatePKCECodeChallenge(attempt.codeVerifier),
        code_challenge_method: 'S256',
        ...(stepUp.acrValues ? { acr_values: stepUp.acrValues } : {}),
        ...(stepUp.maxAge !== undefined ? { max_age: String(stepUp.maxAge) } : {}),
      });
      return { authorizationUrl, attempt };
    },

    /**
     * Checks the authorization response (state, `iss` per RFC 9207, error), redeems the code with the verifier,
     * and checks the ID token (signature, `iss`, `aud`, nonce, expiry) before anything is trusted.
     */
    async finish(callbackUrl: URL, attempt: LoginAttempt): Promise<NewSession> {
      const config = await configuration();
      let tokens;
      try {
        tokens = await client.authorizationCodeGrant(config, callbackUrl, {
          pkceCodeVerifier: attempt.codeVerifier,
          expectedState: attempt.state,
          expectedNonce: attempt.nonce,
          idTokenExpected: true,
        });
      } catch (error) {
        if (isTransportFailure(error)) {
          throw new IssuerUnavailable('The identity provider cannot be reached right now.', describe(error));
        }
        if (error instanceof client.AuthorizationResponseError) {
          // Fixed wording: error_description travels in the URL, so showing it would let anyone put text on our page.
          const code = /^[\w.-]{1,64}$/.test(error.error) ? ` (${error.error})` : '';
          const message =
            error.error === 'access_denied'
              ? 'Sign-in was cancelled or refused at the identity provider'
              : 'The identity provider did not sign you in';
          throw new LoginRejected(`${message}${code}.`, describe(error));
        }
        throw new LoginRejected('The answer from the identity provider could not be verified.', describe(error));
      }
      return sessionFrom(tokens);
    },

    /** The issuer's RP-initiated logout URL, or null when it has none (or cannot be reached). */
    async endSessionUrl(idToken: string | undefined): Promise<URL | null> {
      let config;
      try {
        config = await configuration();
      } catch {
        return null;
      }
      if (!config.serverMetadata().end_session_endpoint) return null;
      return client.buildEndSessionUrl(config, {
        post_logout_redirect_uri: opts.postLogoutRedirectUri,
        ...(idToken ? { id_token_hint: idToken } : {}),
      });
    },
  };
}

export type BrowserLogin = ReturnType<typeof createBrowserLogin>;

/**
 * The web client for this deployment: `orders-web` at the embedded issuer, or OIDC_CLIENT_ID/SECRET at an external
 * one. Null when an external issuer has no web client configured (browser sign-in then answers 503).
 */
export function browserLoginFor(config: Config, issuer: string, verifier: TokenVerifier): BrowserLogin | null {
  const client = config.oidc.issuer
    ? config.oidc.clientId
      ? { clientId: config.oidc.clientId, clientSecret: config.oidc.clientSecret }
      : null
    : // Registered by the embedded IdP (src/auth/idp/clients.ts); development only.
      { clientId: WEB_CLIENT_ID, clientSecret: WEB_CLIENT_SECRET };
  if (!client) return null;
  return createBrowserLogin({
    issuer,
    clientId: client.clientId,
    ...(client.clientSecret ? { clientSecret: client.clientSecret } : {}),
    redirectUri: `${config.publicUrl}/auth/callback`,
    postLogoutRedirectUri: `${config.publicUrl}/`,
    allowInsecureRequests: new URL(issuer).protocol === 'http:' && (!config.isProduction || config.oidc.allowHttp),
    verifier,
    rolesClaim: config.oidc.rolesClaim,
    linkClaim: config.scim.linkClaim,
  });
}
