import type { ErrorCode, InvalidField } from '../../domain/errors.js';
import { tracing } from '../../tracing.js';

export interface ProblemType {
  readonly status: number;
  readonly title: string;
  readonly slug: string;
  /** What it means and what to do, for the human page at the type URI. */
  readonly description: string;
}

/**
 * The one catalogue of error codes: every code any transport sends is registered here once, with its HTTP
 * status, title and `type` URI (`/problems/<slug>`, a page served by this API). REST sends it as a problem's
 * `code`, GraphQL as `extensions.code`. The domain's own codes (domain/errors.ts) must all be here: the type below
 * fails to compile otherwise.
 */
export const PROBLEM_TYPES = {
  UNAUTHENTICATED: {
    status: 401,
    title: 'Authentication required',
    slug: 'unauthenticated',
    description:
      'Send a valid access token as Authorization: Bearer <token>. The WWW-Authenticate header says why the token was refused.',
  },
  INSUFFICIENT_SCOPE: {
    status: 403,
    title: 'Insufficient scope',
    slug: 'insufficient-scope',
    description:
      'The access token is valid but was not granted the scope this needs: orders:read for reads, orders:write for writes.',
  },
  INSUFFICIENT_USER_AUTHENTICATION: {
    status: 401,
    title: 'Stronger sign-in required',
    slug: 'insufficient-user-authentication',
    description:
      'This staff change needs a recent sign-in with a second factor (RFC 9470 step-up). Sign in again with the acr_values and max_age that WWW-Authenticate (and acrValues, maxAge) name, then retry.',
  },
  FORBIDDEN: {
    status: 403,
    title: 'Forbidden',
    slug: 'forbidden',
    description:
      'You are signed in, but your role does not allow this action (for example, customers may only cancel their own pending orders, and only staff may delete).',
  },
  NOT_FOUND: {
    status: 404,
    title: 'Not found',
    slug: 'not-found',
    description:
      'There is no such order (or webhook endpoint, or delivery), or it belongs to someone else: the API does not tell the two apart. On /graphql/stream: no such reserved stream.',
  },
  BAD_USER_INPUT: {
    status: 422,
    title: 'Invalid input',
    slug: 'invalid-input',
    description:
      'Some fields are invalid. The errors member lists each one with a JSON pointer into the request body and the reason.',
  },
  INVALID_TRANSITION: {
    status: 409,
    title: 'Invalid status transition',
    slug: 'invalid-transition',
    description:
      'Orders move pending → paid → shipped → delivered, and pending or paid → cancelled. The detail names the moves possible from the current status.',
  },
  NOT_EDITABLE: {
    status: 409,
    title: 'Order not editable',
    slug: 'not-editable',
    description: 'Only pending orders can have their items replaced.',
  },
  PRECONDITION_FAILED: {
    status: 412,
    title: 'Precondition failed',
    slug: 'precondition-failed',
    description:
      'The order changed since the ETag you sent in If-Match (or it exists in a version your If-None-Match excludes: * excludes every version). GET it again, re-apply your change and retry with the new ETag.',
  },
  PRECONDITION_REQUIRED: {
    status: 428,
    title: 'Precondition required',
    slug: 'precondition-required',
    description:
      'This write must be conditional: send If-Match with the ETag you last read, so it cannot overwrite a change you have not seen.',
  },
  IDEMPOTENCY_KEY_REQUIRED: {
    status: 400,
    title: 'Idempotency-Key required',
    slug: 'idempotency-key-required',
    description:
      'Creating an order needs an Idempotency-Key header of 1 to 255 visible ASCII characters, unique per intended order (a UUID is a good choice).',
  },
  IDEMPOTENCY_KEY_IN_USE: {
    status: 409,
    title: 'Idempotency-Key in use',
    slug: 'idempotency-key-in-use',
    description:
      'A request with this Idempotency-Key is still being processed. Retry after a moment: you will get its result.',
  },
  IDEMPOTENCY_KEY_REUSED: {
    status: 422,
    title: 'Idempotency-Key reused',
    slug: 'idempotency-key-reused',
    description:
      'This Idempotency-Key was already used (within 24 hours) with a different request body. Use a new key for a new order.',
  },
  RATE_LIMITED: {
    status: 429,
    title: 'Rate limit exceeded',
    slug: 'rate-limited',
    description:
      'This client has spent its budget of points for the current window (REST requests cost a fixed price, GraphQL operations their computed cost). The RateLimit header shows what is left; retry after the number of seconds in Retry-After.',
  },
  INTERNAL_SERVER_ERROR: {
    status: 500,
    title: 'Internal server error',
    slug: 'internal',
    description:
      'Something failed on our side and nothing was changed. Retrying is safe for idempotent requests; quote the X-Request-Id when reporting it.',
  },
  ROUTE_NOT_FOUND: {
    status: 404,
    title: 'No such resource',
    slug: 'route-not-found',
    description: 'Nothing is served at this path. The REST endpoints are described at /v1/openapi.json.',
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    title: 'Method not allowed',
    slug: 'method-not-allowed',
    description: 'The resource does not support this method; the Allow header lists those it does.',
  },
  MALFORMED_REQUEST: {
    status: 400,
    title: 'Malformed request',
    slug: 'malformed-request',
    description:
      'The request could not be read: the body is not valid JSON or not valid for its Content-Encoding, the path is not percent-encoded UTF-8, or a query parameter (such as a list cursor) is malformed.',
  },
  HEADERS_TOO_LARGE: {
    status: 431,
    title: 'Request headers too large',
    slug: 'headers-too-large',
    description:
      'The request line and headers together exceed the 16 KB this server reads. Usually an oversized cookie or token: sign in again or send fewer headers.',
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    title: 'Request body too large',
    slug: 'payload-too-large',
    description: 'The request body exceeds the limit named in the detail.',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    title: 'Unsupported media type',
    slug: 'unsupported-media-type',
    description:
      'Send application/json for POST and PUT, and application/merge-patch+json or application/json for PATCH (see the Accept-Patch header), in UTF-8, and with no Content-Encoding or gzip, deflate or br (see the Accept-Encoding header).',
  },
  NOT_ACCEPTABLE: {
    status: 406,
    title: 'Not acceptable',
    slug: 'not-acceptable',
    description: 'The Accept header allows no media type this resource can produce.',
  },
  SERVICE_UNAVAILABLE: {
    status: 503,
    title: 'Service unavailable',
    slug: 'service-unavailable',
    description: 'The service is starting, draining or cannot reach a dependency. Retry shortly.',
  },
  BAD_REQUEST: {
    status: 400,
    title: 'Bad GraphQL request',
    slug: 'bad-request',
    description:
      'The request is not well-formed GraphQL over HTTP (a bad body or parameter, a mutation sent with GET, a subscription over plain HTTP), or could be a cross-site forgery (the session cookie, or in production a GET with query text).',
  },
  GRAPHQL_PARSE_FAILED: {
    status: 400,
    title: 'GraphQL syntax error',
    slug: 'graphql-parse-failed',
    description: 'The query is not valid GraphQL syntax, or has more tokens than the server parses.',
  },
  GRAPHQL_VALIDATION_FAILED: {
    status: 400,
    title: 'GraphQL validation failed',
    slug: 'graphql-validation-failed',
    description:
      'The query does not validate against the schema, or exceeds a limit on depth, aliases or directives. The message names the rule.',
  },
  OPERATION_RESOLUTION_FAILURE: {
    status: 400,
    title: 'Operation not determined',
    slug: 'operation-resolution-failure',
    description: 'The document holds several operations and operationName does not name one of them.',
  },
  PERSISTED_QUERY_NOT_FOUND: {
    status: 400,
    title: 'Persisted query not found',
    slug: 'persisted-query-not-found',
    description: 'The server does not know this hash: send the query text with it once (automatic persisted queries).',
  },
  PERSISTED_QUERY_NOT_SUPPORTED: {
    status: 400,
    title: 'Persisted queries not supported',
    slug: 'persisted-query-not-supported',
    description: 'This server does not accept persisted queries in this form.',
  },
  PERSISTED_QUERY_HASH_MISMATCH: {
    status: 400,
    title: 'Persisted query hash mismatch',
    slug: 'persisted-query-hash-mismatch',
    description: 'The sha256Hash sent does not match the SHA-256 of the query text sent with it.',
  },
  PERSISTED_QUERY_NOT_TRUSTED: {
    status: 400,
    title: 'Document not trusted',
    slug: 'persisted-query-not-trusted',
    description: 'This server runs only the documents of its trusted-documents manifest; send a documentId from it.',
  },
  QUERY_TOO_COMPLEX: {
    status: 400,
    title: 'Query too complex',
    slug: 'query-too-complex',
    description:
      'The operation asks for more objects than MAX_QUERY_COST allows; extensions.cost shows its cost and the limit.',
  },
  REQUEST_TIMEOUT: {
    status: 408,
    title: 'Request timeout',
    slug: 'request-timeout',
    description:
      'The request did not arrive in time: its body sent nothing for BODY_IDLE_TIMEOUT_S seconds, or the whole request took longer than REQUEST_TIMEOUT_S. The connection is closed; send the request again.',
  },
  TOO_MANY_CONNECTIONS: {
    status: 503,
    title: 'Too many connections',
    slug: 'too-many-connections',
    description:
      'This address holds as many connections to this server as HTTP_MAX_CONNECTIONS_PER_IP allows (the trusted proxies together, HTTP_MAX_PROXY_CONNECTIONS; at a balancer, its per-client limit), none of them idle, so this one was closed (503, so a balancer tries another replica). Reuse an open connection or close one, then retry.',
  },
  TOO_MANY_SUBSCRIPTIONS: {
    status: 429,
    title: 'Too many subscriptions',
    slug: 'too-many-subscriptions',
    description:
      'This connection, user or client address already holds as many subscriptions and streams as it may; end one first.',
  },
} as const satisfies Record<string, ProblemType>;

/** Every error code either transport sends: the keys of the catalogue, and nothing else. */
export type ApiErrorCode = keyof typeof PROBLEM_TYPES;

/** Compile-time proof that each domain code is registered. */
const DOMAIN_CODES_REGISTERED: Readonly<Record<ErrorCode, ProblemType>> = PROBLEM_TYPES;
void DOMAIN_CODES_REGISTERED;

export function isApiErrorCode(code: unknown): code is ApiErrorCode {
  return typeof code === 'string' && Object.hasOwn(PROBLEM_TYPES, code);
}

export function problemTypeUri(code: ApiErrorCode): string {
  return `/problems/${PROBLEM_TYPES[code].slug}`;
}

/** RFC 3986 §3.3: what a path may hold unescaped (unreserved, sub-delims, ":", "@", and "/" between segments). */
const PATH_CHARACTER = /[A-Za-z0-9\-._~!$&'()*+,;=:@/]/;
const PERCENT_ENCODED = /^%[0-9A-Fa-f]{2}/;

const percentEncoded = (character: string) => {
  const code = character.codePointAt(0)!;
  // Node reads a request target's bytes one per character (latin1): encoding them so gives back the bytes sent.
  const bytes = code <= 0xff ? [code] : [...Buffer.from(character, 'utf8')];
  return bytes.map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
};

/**
 * RFC 9457 §3.1.5: `instance` is a URI reference naming this occurrence, here the path of the request. Only the
 * path: the query holds cursors, page sizes and, from careless clients, credentials, and is not what the problem
 * is about. Every character RFC 3986 does not allow in a path, and every `%` that does not start an escape, is
 * percent-encoded, so that any request target (`/v1/orders/%ZZ`, `/<script>`, `"`) yields a valid reference that
 * carries no markup, quote or brace back to the client. A target in absolute form keeps only its path.
 */
export function problemInstance(target: string): string {
  let path = target.split(/[?#]/, 1)[0]!;
  if (!path.startsWith('/')) path = URL.canParse(path) ? new URL(path).pathname : '/';
  let out = '';
  for (let i = 0; i < path.length;) {
    const escape = path[i] === '%' ? PERCENT_ENCODED.exec(path.slice(i, i + 3)) : null;
    if (escape) {
      out += escape[0];
      i += 3;
      continue;
    }
    const character = String.fromCodePoint(path.codePointAt(i)!);
    out += PATH_CHARACTER.test(character) ? character : percentEncoded(character);
    i += character.length;
  }
  return out;
}

/**
 * An RFC 9457 problem details body for a code of the catalogue; `target` is the request's, as it was sent, and
 * `members` are its type's extension members.
 */
export function problemBody(
  code: ApiErrorCode,
  detail: string,
  target: string,
  invalid?: readonly InvalidField[],
  members?: Readonly<Record<string, unknown>>,
) {
  const type = PROBLEM_TYPES[code];
  return {
    type: problemTypeUri(code),
    title: type.title,
    status: type.status,
    detail,
    instance: problemInstance(target),
    code,
    ...(invalid ? { errors: invalid } : {}),
    ...members,
    ...traceIdMember(),
  };
}

/**
 * `traceId`: the trace of the request being answered, so that a user's bug report leads to it. Present only when
 * tracing is on (REST problems carry it as a member, GraphQL errors as `extensions.traceId`).
 */
export function traceIdMember(): { traceId?: string } {
  const traceId = tracing.traceId();
  return traceId ? { traceId } : {};
}
