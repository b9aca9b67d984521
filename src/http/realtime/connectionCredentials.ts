import { CloseCode } from 'graphql-ws';
import { BEARER, type Credential, type Refusal } from '../../auth/credentials.js';
import { readCookie } from '../middleware/index.js';

const ACCEPTED_PARAMS = 'send { "authorization": "Bearer <token>" } or nothing';
/** W3C Trace Context may ride along (a client's trace for the connection's operations; read by the tracing). */
const TRACE_CONTEXT = new Set(['traceparent', 'tracestate']);

/**
 * The access token in `connection_init`'s payload: `authorization` (or `Authorization`), "Bearer " optional. A
 * payload in any other shape (`{ token }`, `{ headers: { Authorization } }`) is refused with the accepted one named,
 * rather than silently taken for an anonymous connection. `traceparent` and `tracestate` strings may come beside it.
 */
function bearerFrom(params: Record<string, unknown> | null | undefined): { token?: string } | { refused: string } {
  const all = Object.keys(params ?? {});
  const keys = all.filter((key) => !TRACE_CONTEXT.has(key));
  const unknown = keys.find((key) => key !== 'authorization' && key !== 'Authorization');
  const notText = all.find((key) => TRACE_CONTEXT.has(key) && typeof params![key] !== 'string');
  if (notText !== undefined) return { refused: `Bad connectionParams: ${notText} is not a string` };
  if (unknown !== undefined) {
    // A close reason is at most 123 bytes: the key is shown shortened and in ASCII.
    const shown = unknown.replace(/[^\w.-]/g, '?').slice(0, 24);
    return { refused: `Bad connectionParams: unknown key "${shown}"; ${ACCEPTED_PARAMS}` };
  }
  if (keys.length > 1)
    return { refused: `Bad connectionParams: both authorization and Authorization; ${ACCEPTED_PARAMS}` };
  if (!keys.length) return {};
  const value = params![keys[0]!];
  if (typeof value !== 'string')
    return { refused: `Bad connectionParams: authorization is not a string; ${ACCEPTED_PARAMS}` };
  return { token: value.replace(/^Bearer +/i, '') };
}

/**
 * The credential a WebSocket connection presents: the access token of its `connection_init` payload, or else the
 * browser session cookie of its upgrade request; undefined for none (anonymous), or why the payload is refused.
 */
export function connectionCredential(
  connectionParams: Record<string, unknown> | null | undefined,
  cookieHeader: string | undefined,
  sessionCookie: string,
): Credential | undefined | { refused: string } {
  const params = bearerFrom(connectionParams);
  if ('refused' in params) return params;
  if (params.token !== undefined) return { kind: 'token', token: params.token, presentation: BEARER };
  const sessionId = readCookie(cookieHeader, sessionCookie);
  return sessionId === undefined ? undefined : { kind: 'session', id: sessionId };
}

/**
 * How a refused credential closes the connection: 4403 Forbidden, which graphql-ws's protocol reserves for a refused
 * `connection_init` and its client retries (calling a `connectionParams` function again, so a refreshed token is
 * sent). 4401 would be final: the client treats it as fatal whatever `shouldRetry` says.
 * An account the directory has deactivated is said so.
 */
export function closeReasonFor(refusal: Refusal): [code: number, reason: string] {
  if (refusal.reason === 'deactivated') return [CloseCode.Forbidden, 'Forbidden: account deactivated'];
  if (refusal.reason === 'session_ended')
    return [CloseCode.Forbidden, 'Forbidden: the session has ended; sign in again'];
  return [
    CloseCode.Forbidden,
    refusal.reason === 'bound_token'
      ? 'Forbidden: DPoP-bound access tokens are not accepted over WebSocket; use a Bearer token'
      : 'Forbidden: the access token is not valid',
  ];
}
