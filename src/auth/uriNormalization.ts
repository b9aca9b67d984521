/** RFC 3986 §2.3: characters that mean the same percent-encoded or not. */
const UNRESERVED = /^[A-Za-z0-9._~-]$/;

/**
 * A URI in the form that equivalent URIs share (RFC 3986 §6.2.2 and §6.2.3): scheme and host in lower case, dot
 * segments removed, an http(s) URI's empty path as "/" and its default port dropped (all done by the WHATWG URL
 * parser), and percent-encoded unreserved characters decoded, other percent-encodings in upper case. Null when the
 * value is not an absolute URI.
 */
export function normalizedUri(value: string): URL | null {
  const url = URL.parse(value);
  if (!url) return null;
  return new URL(
    url.href.replace(/%[0-9A-Fa-f]{2}/g, (escape) => {
      const char = String.fromCharCode(Number.parseInt(escape.slice(1), 16));
      return UNRESERVED.test(char) ? char : escape.toUpperCase();
    }),
  );
}
