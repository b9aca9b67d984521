import { databaseUnavailable } from '../domain/errors.js';

/**
 * Socket-level failures: the server is not there, or the connection to it broke. A host name that no longer resolves
 * (a database container that is gone takes its DNS name with it) is the same outage seen through DNS.
 */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNRESET',
  'ENOENT',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/**
 * SQLSTATEs meaning "not now" rather than "wrong": class 08 (connection exception), 57P01
 * admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up or shutting down).
 */
const UNAVAILABLE_STATE = /^(08...|57P0[123])$/;

/** pg reports a lost connection and a pool wait that timed out only in its messages. */
const UNAVAILABLE_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/;

export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || UNAVAILABLE_STATE.test(code))) return true;
  if (UNAVAILABLE_MESSAGE.test(error.message)) return true;
  // A refused connection to a host with several addresses arrives as an AggregateError of them.
  return error instanceof AggregateError && error.errors.some(isDatabaseUnavailable);
}

/** Rethrows a connection failure as the typed "database unavailable" error; anything else as it is. */
export function translateDatabaseError(error: unknown): never {
  throw isDatabaseUnavailable(error) ? databaseUnavailable(error) : error;
}
