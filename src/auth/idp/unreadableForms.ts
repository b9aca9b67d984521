/**
 * A form body body-parser refused before any route read it: more than the form could have sent (too large, or more
 * fields than it has: 413), or unreadable (a broken encoding, an unknown charset, cut short: 400). Null for any other
 * failure, which is the server's. The error carries the body it refused: it is never logged (logger.ts drops it).
 */
export function unreadableForm(error: unknown): { status: 400 | 413; tooMuch: boolean } | null {
  if (typeof error !== 'object' || error === null) return null;
  const { type, status } = error as { type?: unknown; status?: unknown };
  if (typeof type !== 'string' || typeof status !== 'number' || status < 400 || status >= 500) return null;
  const tooMuch = type === 'entity.too.large' || type === 'parameters.too.many';
  return { status: tooMuch ? 413 : 400, tooMuch };
}
