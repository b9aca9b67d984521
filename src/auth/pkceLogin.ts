import * as client from 'openid-client';
import { generate } from 'otplib';
import { CookieJar } from './cookieJar.js';

export interface PkceLoginOptions {
  issuer: string;
  username: string;
  password: string;
  /** Defaults to 'orders-mobile'. */
  clientId?: string;
  /** Defaults to 'http://127.0.0.1/callback'. */
  redirectUri?: string;
  /** Defaults to 'openid profile email orders:read orders:write'. */
  scope?: string;
  /** The resource indicator (RFC 8707) sent with the authorization and token requests; none by default. */
  resource?: string;
  /** Asks for a DPoP-bound access token (RFC 9449) tied to this key pair; see `dpop` in the result. */
  dpopKeyPair?: client.CryptoKeyPair;
  /** Step-up (RFC 9470 §4): the `acr_values` to ask for, e.g. `urn:orders:acr:mfa`. */
  acrValues?: string;
  /** Step-up: the `max_age` to ask for, in seconds. */
  maxAge?: number;
  /**
   * The Base32 TOTP secret that answers the IdP's second-factor step, as an authenticator app would. Without it, a
   * second-factor page is a failure.
   */
  totpSecret?: string;
}

export interface PkceLoginResult {
  accessToken: string;
  idToken?: string;
  refreshToken?: string;
  expiresIn: number;
  tokenType: string;
  /** The client configuration, for openid-client calls with the token (fetchProtectedResource). */
  config: client.Configuration;
  /** The handle that signs DPoP proofs with `dpopKeyPair`, when one was given. */
  dpop?: client.DPoPHandle;
}

const TIMEOUT_SECONDS = 15;
/** Authorization request, login, consent and their redirects take well under this many steps. */
const MAX_STEPS = 15;

/**
 * Signs in the way a mobile app does: public client, authorization code + PKCE (S256), with the browser's
 * part (following redirects, filling in the sign-in form) played over plain HTTP. The redirect URI itself
 * is never requested; the code is read from the redirect that points at it.
 */
export async function loginWithPkce(opts: PkceLoginOptions): Promise<PkceLoginResult> {
  const clientId = opts.clientId ?? 'orders-mobile';
  const redirectUri = opts.redirectUri ?? 'http://127.0.0.1/callback';
  const scope = opts.scope ?? 'openid profile email orders:read orders:write';
  const issuer = URL.parse(opts.issuer);
  if (!issuer || !['http:', 'https:'].includes(issuer.protocol)) {
    throw new Error(`the issuer must be an http(s) URL, got ${JSON.stringify(opts.issuer)}`);
  }

  const config = await step(`cannot load the OpenID configuration of ${issuer.href}`, () =>
    client.discovery(issuer, clientId, undefined, client.None(), {
      timeout: TIMEOUT_SECONDS,
      execute: issuer.protocol === 'http:' ? [client.allowInsecureRequests] : [],
    }),
  );

  const dpop = opts.dpopKeyPair && client.getDPoPHandle(config, opts.dpopKeyPair);
  const codeVerifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const authorizationUrl = client.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope,
    response_type: 'code',
    code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...(opts.resource ? { resource: opts.resource } : {}),
    ...(opts.acrValues ? { acr_values: opts.acrValues } : {}),
    ...(opts.maxAge !== undefined ? { max_age: String(opts.maxAge) } : {}),
  });

  const browser = new Browser(issuer.origin);
  const callbackUrl = await signIn(browser, authorizationUrl, redirectUri, opts);

  const params = callbackUrl.searchParams;
  if (params.get('error')) {
    const description = params.get('error_description');
    throw new Error(`authorization failed: ${params.get('error')}${description ? ` (${description})` : ''}`);
  }
  if (params.get('state') !== state) throw new Error('authorization failed: state mismatch in the redirect');
  if (!params.get('code')) throw new Error('authorization failed: the redirect carries no code');

  const tokens = await step('token request failed', () =>
    client.authorizationCodeGrant(
      config,
      callbackUrl,
      {
        pkceCodeVerifier: codeVerifier,
        expectedState: state,
        expectedNonce: nonce,
        idTokenExpected: scope.split(' ').includes('openid'),
      },
      opts.resource ? { resource: opts.resource } : undefined,
      dpop ? { DPoP: dpop } : undefined,
    ),
  );

  return {
    accessToken: tokens.access_token,
    idToken: tokens.id_token,
    refreshToken: tokens.refresh_token,
    expiresIn: tokens.expires_in ?? 0,
    tokenType: tokens.token_type,
    config,
    ...(dpop ? { dpop } : {}),
  };
}

/**
 * The codes an authenticator app would show for a sign-in now: this step's, then the next one's (the IdP accepts a
 * step either side), for when this step's code was already used by an earlier sign-in.
 */
async function totpCodes(secret: string): Promise<string[]> {
  const now = Math.floor(Date.now() / 1000);
  return Promise.all([now, now + 30].map((epoch) => generate({ secret, epoch })));
}

/** Follows the authorization request through the IdP's pages until it redirects to the redirect URI. */
async function signIn(
  browser: Browser,
  authorizationUrl: URL,
  redirectUri: string,
  opts: Pick<PkceLoginOptions, 'username' | 'password' | 'totpSecret'>,
): Promise<URL> {
  const { username, password } = opts;
  let response = await browser.request(authorizationUrl);
  let signedIn = false;
  let consented = false;
  let codes: string[] | undefined;

  for (let steps = 0; steps < MAX_STEPS; steps++) {
    if (response.status >= 300 && response.status < 400) {
      const location = response.headers.get('location');
      if (!location) throw new Error(`sign-in failed: redirect without a location from ${response.url}`);
      const next = new URL(location, response.url);
      if (withoutQuery(next) === withoutQuery(new URL(redirectUri))) return next;
      response = await browser.request(next);
      continue;
    }

    const html = await response.text();
    const totpAction = formAction(html, /\/totp$/);
    if (totpAction && (response.status === 200 || (response.status === 401 && codes?.length))) {
      if (!opts.totpSecret) throw new Error('sign-in failed: the identity provider asks for a second factor');
      codes ??= await totpCodes(opts.totpSecret);
      response = await browser.request(new URL(totpAction, response.url), { code: codes.shift()! });
      continue;
    }
    if (response.status === 401 && totpAction) {
      throw new Error(`sign-in failed: the TOTP code was refused (${describeErrorPage(html)})`);
    }
    if (response.status === 401 && signedIn) throw new Error('sign-in failed: wrong username or password');
    if (response.status !== 200) {
      throw new Error(`sign-in failed: ${response.url} answered ${response.status} ${describeErrorPage(html)}`.trim());
    }

    const loginAction = formAction(html, /\/login$/);
    if (loginAction && !signedIn) {
      signedIn = true;
      response = await browser.request(new URL(loginAction, response.url), { username, password });
      continue;
    }
    const confirmAction = formAction(html, /\/confirm$/);
    if (confirmAction && !consented) {
      consented = true;
      response = await browser.request(new URL(confirmAction, response.url), {});
      continue;
    }
    throw new Error(`sign-in failed: unexpected page at ${response.url}`);
  }
  throw new Error('sign-in failed: too many redirects');
}

function withoutQuery(url: URL): string {
  return url.href.replace(/[?#].*$/, '');
}

function formAction(html: string, pattern: RegExp): string | undefined {
  for (const match of html.matchAll(/<form\b[^>]*\baction="([^"]*)"/gi)) {
    const action = decodeEntities(match[1]!);
    if (pattern.test(new URL(action, 'http://x').pathname)) return action;
  }
  return undefined;
}

function describeErrorPage(html: string): string {
  const text = html.match(/<main>([\s\S]*?)<\/main>/i)?.[1] ?? '';
  return decodeEntities(text.replace(/<[^>]+>/g, ' '))
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 300);
}

function decodeEntities(text: string): string {
  return text
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** Just enough of a browser: manual redirects and a cookie jar, only ever talking to the issuer's origin. */
class Browser {
  private readonly cookies = new CookieJar();

  constructor(private readonly origin: string) {}

  async request(url: URL, form?: Record<string, string>): Promise<Response> {
    if (url.origin !== this.origin) throw new Error(`sign-in failed: unexpected redirect to ${url.origin}`);
    const headers: Record<string, string> = { accept: 'text/html' };
    const cookie = this.cookies.header();
    if (cookie) headers.cookie = cookie;
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
    const response = await step(`cannot reach ${url.origin}`, () =>
      fetch(url, {
        method: form ? 'POST' : 'GET',
        headers,
        body: form ? new URLSearchParams(form) : undefined,
        redirect: 'manual',
        signal: AbortSignal.timeout(TIMEOUT_SECONDS * 1000),
      }),
    );
    this.cookies.storeFrom(response.headers);
    return response;
  }
}

/** Runs fn, prefixing any failure with what was being attempted. */
async function step<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const reason = err instanceof Error ? (errorDetail(err) ?? err.message) : String(err);
    throw new Error(`${what}: ${reason}`, { cause: err });
  }
}

function errorDetail(err: Error): string | undefined {
  const { error, error_description: description } = err as { error?: unknown; error_description?: unknown };
  if (typeof error !== 'string')
    return err.cause instanceof Error ? `${err.message} (${err.cause.message})` : undefined;
  return typeof description === 'string' ? `${error} (${description})` : error;
}
