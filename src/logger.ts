import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type { LogLevel } from './config/index.js';
import { tracing } from './tracing.js';

const CENSOR = '[redacted]';

/** Query and fragment parameters that carry codes, tokens, or the values binding a sign-in to one browser. */
const SECRET_PARAMS =
  /([?&#](?:code|state|nonce|session_state|id_token_hint|id_token|access_token|token|refresh_token|code_verifier)=)[^&#]*/gi;

/** URLs are worth logging, their credentials are not: sign-in redirects carry a code, state or ID token. */
const URL_PATHS = new Set(['req.url', 'res.headers.location']);

const isEmptyObject = (value: unknown) =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;

/**
 * Members of an error that hold what a client sent: body-parser gives its errors the raw `body` (a sign-in form's
 * password with it), raw-body and others a `rawBody`. They are dropped from every logged error, however deep.
 */
const REQUEST_CONTENT = ['body', 'rawBody'];
const MAX_ERROR_DEPTH = 8;

function withoutRequestContent(value: unknown, depth = 0): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (depth > MAX_ERROR_DEPTH) return '[nested too deep]';
  if (ArrayBuffer.isView(value)) return '[binary]';
  if (Array.isArray(value)) return value.map((item) => withoutRequestContent(item, depth + 1));
  // Plain objects and pino's serialized errors are copied; anything else (a Date, a URL) is logged as it is.
  if (value.constructor !== Object && value.constructor !== undefined) return value;
  const copy: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) {
    if (!REQUEST_CONTENT.includes(key)) copy[key] = withoutRequestContent(member, depth + 1);
  }
  return copy;
}

/** pino's error serializer, without what the client sent (a copy: the error itself is left as it is). */
const serializeError = (err: unknown) => withoutRequestContent(pino.stdSerializers.err(err as Error));

/**
 * JSON lines, credentials redacted wherever they could appear. `pretty` (main.ts: a terminal, outside production)
 * renders the same records as short coloured lines with pino-pretty, in pino's worker thread; log collectors and
 * pipes always get JSON.
 */
export function createLogger(
  level: LogLevel,
  opts: {
    pretty?: boolean;
    /** Tracing is on: every line written inside a span carries its `trace_id` and `span_id`. */
    traced?: boolean;
    destination?: DestinationStream;
  } = {},
): Logger {
  const options: LoggerOptions<never> = {
    level,
    // Read per line, from the active context; with tracing off no mixin runs at all.
    ...(opts.traced ? { mixin: () => tracing.logFields() } : {}),
    ...(opts.pretty
      ? {
          transport: {
            target: 'pino-pretty',
            options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service', singleLine: true },
          },
        }
      : {}),
    base: { service: 'orders-api' },
    serializers: { err: serializeError, error: serializeError },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        'req.url',
        // The parsed query string repeats what req.url carries, unredacted.
        'req.query',
        'req.headers.authorization',
        // A DPoP proof is a credential until it is used or 60 s old.
        'req.headers.dpop',
        'req.headers.cookie',
        'res.headers.location',
        'res.headers["set-cookie"]',
        '*.password',
        '*.access_token',
        '*.id_token',
        '*.refresh_token',
        '*.code_verifier',
      ],
      // A wildcard path's first step is one of pino's symbols, which join() would throw on.
      censor: (value: unknown, path: (string | symbol)[]) =>
        URL_PATHS.has(path.map((step) => (typeof step === 'string' ? step : '*')).join('.')) &&
        typeof value === 'string'
          ? value.replace(SECRET_PARAMS, `$1${CENSOR}`)
          : isEmptyObject(value)
            ? // Nothing to hide (a URL without a query string): leave it out rather than claim a redaction.
              undefined
            : CENSOR,
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
