import cors from 'cors';

/**
 * CORS for the configured origins (CORS_ORIGINS): credentials allowed, so that a browser app there can use its
 * session cookie, and every response header a client of this API reads made visible to it.
 */
export function crossOrigin(origins: readonly string[]) {
  return cors({
    origin: [...origins],
    credentials: true,
    exposedHeaders: [
      'ETag',
      'Location',
      'Link',
      'X-Request-Id',
      'WWW-Authenticate',
      'Idempotent-Replayed',
      'RateLimit',
      'RateLimit-Policy',
      'Retry-After',
    ],
    maxAge: 600,
  });
}
