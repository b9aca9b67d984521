/**
 * The one format of an idempotency key, on both transports (REST's Idempotency-Key header, GraphQL's
 * `idempotencyKey` argument): keys are opaque to the API, and the bound keeps the table and its index small.
 */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

export const IDEMPOTENCY_KEY_RULE = '1 to 255 visible ASCII characters';

export function isValidIdempotencyKey(key: string): boolean {
  return IDEMPOTENCY_KEY_PATTERN.test(key);
}
