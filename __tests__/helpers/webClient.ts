import { CookieJar } from '../../src/auth/cookieJar.js';
import { asFetchResponse, http, type Method } from './http.js';

/**
 * A browser stand-in (requests sent with supertest) for HTTP-level tests of browser sign-in: one cookie jar per host (as browsers keep cookies
 * regardless of port), manual redirects, and the embedded IdP's sign-in form filled in the way a person would.
 */
export class WebClient {
  private readonly jars = new Map<string, CookieJar>();

  cookie(url: string | URL, name: string): string | undefined {
    return this.jars.get(new URL(url).hostname)?.get(name);
  }

  setCookie(url: string | URL, name: string, value: string): void {
    this.jar(new URL(url)).set(name, value);
  }

  async get(url: string | URL, headers: Record<string, string> = {}): Promise<Response> {
    return this.send(new URL(url), { method: 'GET', headers });
  }

  async post(url: string | URL, form: Record<string, string> = {}, headers: Record<string, string> = {}) {
    return this.send(new URL(url), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(form),
    });
  }

  /** POST /graphql with this browser's cookies, as a same-origin page script would. */
  async graphql(appUrl: string, query: string, headers: Record<string, string> = {}) {
    const res = await this.send(new URL('/graphql', appUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query }),
    });
    const body = (await res.json()) as {
      data?: Record<string, unknown> | null;
      errors?: { message: string; extensions: { code: string } }[];
    };
    return { status: res.status, headers: res.headers, body };
  }

  private jar(url: URL): CookieJar {
    let jar = this.jars.get(url.hostname);
    if (!jar) this.jars.set(url.hostname, (jar = new CookieJar()));
    return jar;
  }

  private async send(
    url: URL,
    init: { method: string; headers: Record<string, string>; body?: string | URLSearchParams },
  ) {
    const jar = this.jar(url);
    const headers = { ...init.headers };
    const cookie = jar.header();
    if (cookie && !('cookie' in headers)) headers.cookie = cookie;
    let req = http(url.origin)
      .method(init.method as Method, `${url.pathname}${url.search}`)
      .set(headers);
    if (init.body !== undefined) req = req.send(init.body.toString());
    const res = asFetchResponse(await req, url.href, init.method);
    jar.storeFrom(res.headers);
    return res;
  }
}

export function location(res: Response): URL {
  const value = res.headers.get('location');
  if (!value) throw new Error(`expected a redirect from ${res.url}, got ${res.status}`);
  return new URL(value, res.url);
}

function loginFormAction(html: string, pageUrl: string): URL {
  const action = /<form method="post" action="([^"]+\/login)"/.exec(html)?.[1];
  if (!action) throw new Error(`no sign-in form at ${pageUrl}`);
  return new URL(action.replace(/&amp;/g, '&'), pageUrl);
}

/**
 * POST /auth/logout as the home page's Sign out button does: with the session's CSRF token (read here from
 * /auth/session, which a same-origin page script may do too). Without a session, no token is sent.
 */
export async function signOut(browser: WebClient, appUrl: string, headers: Record<string, string> = {}) {
  const me = await browser.get(`${appUrl}/auth/session`);
  const form: Record<string, string> =
    me.status === 200 ? { csrf: ((await me.json()) as { csrfToken: string }).csrfToken } : {};
  return browser.post(`${appUrl}/auth/logout`, form, headers);
}

/** GET /auth/login; returns the authorization URL it redirects to. */
export async function startLogin(browser: WebClient, appUrl: string, returnTo?: string): Promise<URL> {
  const query = returnTo === undefined ? '' : `?returnTo=${encodeURIComponent(returnTo)}`;
  const res = await browser.get(`${appUrl}/auth/login${query}`);
  if (res.status !== 302) throw new Error(`/auth/login answered ${res.status}: ${await res.text()}`);
  return location(res);
}

/**
 * Follows the authorization request through the IdP, submitting its sign-in form (or, with `cancel`, its abort
 * action), and returns the redirect back to the app's callback without requesting it.
 */
export async function signInAtIdp(
  browser: WebClient,
  authorizationUrl: URL,
  user: string,
  opts: { cancel?: boolean } = {},
): Promise<URL> {
  let res = await browser.get(authorizationUrl);
  for (let step = 0; step < 10; step++) {
    if (res.status === 200) {
      const action = loginFormAction(await res.text(), res.url);
      res = opts.cancel
        ? await browser.post(new URL(action.href.replace(/\/login$/, '/abort')))
        : await browser.post(action, { username: user, password: user });
      continue;
    }
    const next = location(res);
    if (next.pathname === '/auth/callback') return next;
    res = await browser.get(next);
  }
  throw new Error('too many steps at the IdP');
}

/** The whole sign-in: /auth/login → IdP → the callback's response (a 303 with the session cookie when it works). */
export async function signIn(browser: WebClient, appUrl: string, user: string, returnTo?: string) {
  const callback = await signInAtIdp(browser, await startLogin(browser, appUrl, returnTo), user);
  return { callback, response: await browser.get(callback) };
}
