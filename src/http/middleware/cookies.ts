/** The few cookie operations browser sign-in needs (RFC 6265), without a cookie-parsing dependency. */

/** The value of cookie `name` in a Cookie header; undefined when absent or sent more than once. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  const values = header
    .split(';')
    .map((pair) => pair.trim())
    .filter((pair) => pair.startsWith(`${name}=`))
    .map((pair) => pair.slice(name.length + 1));
  // Two cookies of one name (e.g. a sibling subdomain's) make it ambiguous which one is ours: use neither.
  return values.length === 1 ? values[0] : undefined;
}

export interface CookieOptions {
  path: string;
  /** Seconds; 0 deletes the cookie. Omitted: a cookie for the browser session. */
  maxAge?: number;
  secure: boolean;
}

/** HttpOnly and SameSite=Lax always: scripts never read these, and cross-site subrequests never carry them. */
export function serializeCookie(name: string, value: string, opts: CookieOptions): string {
  const parts = [`${name}=${value}`, `Path=${opts.path}`, 'HttpOnly', 'SameSite=Lax'];
  if (opts.maxAge !== undefined) parts.push(`Max-Age=${opts.maxAge}`);
  if (opts.secure) parts.push('Secure');
  return parts.join('; ');
}

/**
 * Cookie names for this deployment. Over https the session cookie takes the `__Host-` prefix, which browsers accept
 * only with Secure, Path=/ and no Domain, so a sibling subdomain cannot plant or shadow it.
 */
export function authCookies(publicUrl: string) {
  const secure = new URL(publicUrl).protocol === 'https:';
  return {
    secure,
    session: secure ? '__Host-orders_session' : 'orders_session',
    // Path=/auth rules out __Host-; __Secure- still demands Secure.
    login: secure ? '__Secure-orders_login' : 'orders_login',
  } as const;
}

/** The origins a cookie-bearing request may come from: the app's own and the configured CORS origins. */
export function trustedOrigins(publicUrl: string, corsOrigins: readonly string[]): ReadonlySet<string> {
  return new Set([new URL(publicUrl).origin, ...corsOrigins]);
}

/** An Origin header that is present and not trusted; browsers send one with every cross-origin POST. */
export function isForeignOrigin(origin: string | undefined, trusted: ReadonlySet<string>): boolean {
  return origin !== undefined && !trusted.has(origin);
}
