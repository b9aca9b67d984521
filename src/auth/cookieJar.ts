/**
 * Just enough of a browser's cookie store for one site: Set-Cookie headers are applied (an expired cookie is
 * removed) and the Cookie header is built from what is kept. Attributes other than expiry are not modelled.
 */
export class CookieJar {
  private readonly cookies = new Map<string, string>();

  get size(): number {
    return this.cookies.size;
  }

  get(name: string): string | undefined {
    return this.cookies.get(name);
  }

  set(name: string, value: string): void {
    this.cookies.set(name, value);
  }

  /** The Cookie request header, or undefined when the jar is empty. */
  header(): string | undefined {
    return this.cookies.size ? [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') : undefined;
  }

  /** Applies every Set-Cookie header of a response. */
  storeFrom(headers: Headers): void {
    for (const line of headers.getSetCookie()) this.store(line);
  }

  store(setCookie: string): void {
    const [pair = '', ...attributes] = setCookie.split(';');
    const eq = pair.indexOf('=');
    if (eq <= 0) return;
    const name = pair.slice(0, eq).trim();
    const expired = attributes.some((a) => {
      const [key = '', value = ''] = a.split('=').map((s) => s.trim().toLowerCase());
      return (key === 'max-age' && Number(value) <= 0) || (key === 'expires' && Date.parse(value) <= Date.now());
    });
    if (expired) this.cookies.delete(name);
    else this.cookies.set(name, pair.slice(eq + 1).trim());
  }
}
