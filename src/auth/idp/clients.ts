import type { ClientConstructor, ClientMetadata } from 'oidc-provider';

export const WEB_CLIENT_ID = 'orders-web';
/** The development web client's secret (SPEC: embedded IdP only); a real issuer's comes from OIDC_CLIENT_SECRET. */
export const WEB_CLIENT_SECRET = 'orders-web-secret';
export const MOBILE_CLIENT_ID = 'orders-mobile';
/** The development directory: gets tokens with scope `scim` by the client-credentials grant (SCIM_SCOPE). */
export const DIRECTORY_CLIENT_ID = 'directory';
export const DIRECTORY_CLIENT_SECRET = 'directory-secret';
/** The one scope the directory client is granted, and the only client it is granted to. */
export const DIRECTORY_SCOPE = 'scim';

/** Clients that belong to this product; their consent is implied, so users only see the sign-in form. */
export const FIRST_PARTY_CLIENTS: ReadonlySet<string> = new Set([WEB_CLIENT_ID, MOBILE_CLIENT_ID]);

export function clientMetadata(publicUrl: string): ClientMetadata[] {
  const base = publicUrl.replace(/\/+$/, '');
  return [
    {
      client_id: WEB_CLIENT_ID,
      client_name: 'Orders web',
      client_secret: WEB_CLIENT_SECRET,
      application_type: 'web',
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: [`${base}/auth/callback`],
      post_logout_redirect_uris: [`${base}/`],
    },
    {
      client_id: MOBILE_CLIENT_ID,
      client_name: 'Orders mobile',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      // oidc-provider matches http loopback redirect URIs of native clients on any port (RFC 8252 §7.3).
      redirect_uris: ['http://127.0.0.1/callback', 'com.example.orders:/oauth2redirect'],
    },
    {
      client_id: DIRECTORY_CLIENT_ID,
      client_name: 'Directory (SCIM provisioning, development)',
      client_secret: DIRECTORY_CLIENT_SECRET,
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      scope: DIRECTORY_SCOPE,
    },
  ];
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1']);

/** http://localhost:<port><path> or http://127.0.0.1:<port><path>, in canonical form and nothing more. */
function isLoopbackUrl(value: string, path: string): boolean {
  const url = URL.parse(value);
  return (
    url !== null &&
    url.href === value &&
    url.protocol === 'http:' &&
    LOOPBACK_HOSTS.has(url.hostname) &&
    url.pathname === path &&
    !url.username &&
    !url.password &&
    !url.search &&
    !url.hash
  );
}

/**
 * Every replica of the app started in development (each on its own loopback port) signs in through this one
 * IdP as orders-web, so orders-web may also return to the loopback callback of any port. oidc-provider has no
 * setting for this: the documented hook is overriding the Client model's redirectUriAllowed /
 * postLogoutRedirectUriAllowed. Everything else keeps oidc-provider's exact matching.
 */
export function allowLoopbackReplicas(Client: ClientConstructor): void {
  const { redirectUriAllowed, postLogoutRedirectUriAllowed } = Client.prototype;
  Client.prototype.redirectUriAllowed = function (this: typeof Client.prototype, value: string): boolean {
    return (
      redirectUriAllowed.call(this, value) ||
      (this.clientId === WEB_CLIENT_ID && isLoopbackUrl(value, '/auth/callback'))
    );
  };
  Client.prototype.postLogoutRedirectUriAllowed = function (this: typeof Client.prototype, value: string): boolean {
    return (
      postLogoutRedirectUriAllowed.call(this, value) || (this.clientId === WEB_CLIENT_ID && isLoopbackUrl(value, '/'))
    );
  };
}
