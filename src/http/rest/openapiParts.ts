import { z } from 'zod';
import { PROBLEM_TYPES, type ApiErrorCode } from '../problems/index.js';
import { contract } from './contract.js';

/** What the OpenAPI document (openapi.ts) is assembled from: components, headers, error responses, request bodies. */

type Json = Record<string, unknown>;

export const ref = (name: string) => ({ $ref: `#/components/${name}` });

/** Zod writes a bare `.int()` as JavaScript's safe-integer range; that is a limit of the language, not the API. */
function withoutSafeIntegerBounds({ jsonSchema }: { jsonSchema: Json }) {
  if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
  if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
}

export function componentSchemas(): Record<string, Json> {
  const { schemas } = z.toJSONSchema(contract, {
    target: 'draft-2020-12',
    metadata: contract,
    io: 'input',
    uri: (id) => `#/components/schemas/${id}`,
    override: withoutSafeIntegerBounds,
  });
  // Each component is a schema inside the document, not a document of its own.
  return Object.fromEntries(
    Object.entries(schemas).map(([id, { $schema: _dialect, $id: _id, ...schema }]) => [id, schema as Json]),
  );
}

/**
 * The response headers this API sends, each declared once (components.headers). A response refers to one where it is
 * always sent, and carries a copy marked optional where it is sent only on some paths to that status.
 */
export const HEADERS = {
  RequestId: {
    required: true,
    description:
      "Names this request in the logs: quote it when reporting a problem. A request's own X-Request-Id (1 to 128 " +
      'letters, digits, `_`, `.`, `:` or `-`) is echoed; otherwise it is a fresh UUID.',
    schema: { type: 'string', pattern: '^[\\w.:-]{1,128}$', maxLength: 128 },
  },
  ETag: {
    required: true,
    description: 'Strong validator; changes with every write.',
    schema: { type: 'string', pattern: '^"ord_[0-9a-z]{26}\\.v[0-9]+"$', maxLength: 64 },
  },
  CacheControl: { required: true, schema: { type: 'string', maxLength: 64 } },
  Vary: {
    required: true,
    description: 'The answer depends on the caller: shared caches must key it by Authorization.',
    schema: { type: 'string', pattern: 'Authorization', maxLength: 256 },
  },
  Location: {
    required: true,
    description: 'The new order.',
    schema: { type: 'string', pattern: '^/v1/orders/ord_[0-9a-z]{26}$', maxLength: 64 },
  },
  WebhookETag: {
    required: true,
    description: 'Strong validator of the webhook endpoint; changes with every write.',
    schema: { type: 'string', pattern: '^"we_[0-9a-z]{26}\\.v[0-9]+"$', maxLength: 64 },
  },
  WebhookLocation: {
    required: true,
    description: 'The new webhook endpoint.',
    schema: { type: 'string', pattern: '^/v1/webhook-endpoints/we_[0-9a-z]{26}$', maxLength: 64 },
  },
  IdempotentReplayed: {
    required: false,
    description: 'Present when this is the replay of the first response to the Idempotency-Key.',
    schema: { const: 'true' },
  },
  Link: {
    required: false,
    description: 'rel="next" when more items follow; on order lists also rel="prev" when items come before.',
    schema: { type: 'string', pattern: '^<[^>]+>; rel="(next|prev)"(, <[^>]+>; rel="prev")?$', maxLength: 4096 },
  },
  WWWAuthenticate: {
    required: true,
    description: 'Why the credentials were refused, or which scope is missing (RFC 6750 §3, RFC 9449 §7.1).',
    schema: { type: 'string', pattern: '^(Bearer|DPoP) ', maxLength: 1024 },
  },
  AcceptPatch: { required: true, schema: { const: 'application/merge-patch+json, application/json' } },
  AcceptPost: { required: true, schema: { const: 'application/json' } },
  Accept: {
    required: true,
    description: 'The media type the body must be sent as.',
    schema: { const: 'application/json' },
  },
  AcceptEncoding: {
    required: true,
    description: 'The content codings a request body may use (RFC 9110 §15.5.16): sent when its coding was refused.',
    schema: { const: 'gzip, deflate, br' },
  },
  RetryAfter: { required: true, schema: { type: 'string', pattern: '^[0-9]+$', maxLength: 10 } },
  RateLimit: {
    required: true,
    description: 'What is left of the budget and seconds until it refills (IETF httpapi RateLimit fields draft).',
    schema: { type: 'string', pattern: '^"orders";r=[0-9]+;t=[0-9]+$', maxLength: 64 },
  },
  RateLimitPolicy: {
    required: true,
    description: 'Points per window and the window in seconds.',
    schema: { type: 'string', pattern: '^"orders";q=[0-9]+;w=[0-9]+$', maxLength: 64 },
  },
} as const;

type HeaderId = keyof typeof HEADERS;

/** A header of a response: the component where it is always sent, an optional copy of it where it may be missing. */
export const header = (id: HeaderId, always = true): Json =>
  always || !HEADERS[id].required ? ref(`headers/${id}`) : { ...HEADERS[id], required: false };

/** Response header names and the components that describe them. */
export type HeaderSet = Partial<Record<string, HeaderId>>;

/** Headers of every answer under /v1: the request id, and the rate budget's fields (its price is charged first). */
const EVERY_ANSWER: HeaderSet = {
  'X-Request-Id': 'RequestId',
  RateLimit: 'RateLimit',
  'RateLimit-Policy': 'RateLimitPolicy',
};

/**
 * Codes that are, on some paths, answered before the request reaches the app (no Host; the server still starting):
 * then without a request id or rate fields.
 */
const BEFORE_THE_APP: readonly ApiErrorCode[] = ['MALFORMED_REQUEST', 'SERVICE_UNAVAILABLE'];
/** Codes that are, on some paths, answered before the price is charged: credentials refused, a failure. */
const BEFORE_THE_CHARGE: readonly ApiErrorCode[] = [...BEFORE_THE_APP, 'UNAUTHENTICATED', 'INTERNAL_SERVER_ERROR'];

/** Headers that come with an error code wherever it is answered. */
const HEADERS_OF: Partial<Record<ApiErrorCode, HeaderSet>> = {
  UNAUTHENTICATED: { 'WWW-Authenticate': 'WWWAuthenticate' },
  INSUFFICIENT_USER_AUTHENTICATION: { 'WWW-Authenticate': 'WWWAuthenticate' },
  INSUFFICIENT_SCOPE: { 'WWW-Authenticate': 'WWWAuthenticate' },
  RATE_LIMITED: { 'Retry-After': 'RetryAfter' },
  IDEMPOTENCY_KEY_IN_USE: { 'Retry-After': 'RetryAfter' },
  SERVICE_UNAVAILABLE: { 'Retry-After': 'RetryAfter' },
};

/** Headers that come with an error code only on some paths to it: a 415 names the content codings when the coding was refused. */
const SOMETIMES_OF: Partial<Record<ApiErrorCode, HeaderSet>> = {
  UNSUPPORTED_MEDIA_TYPE: { 'Accept-Encoding': 'AcceptEncoding' },
};

/** The headers every code of a status sends with its answer: each always sent by some code, optional unless all do. */
function headersOfCodes(codes: readonly ApiErrorCode[], extra: Partial<Record<ApiErrorCode, HeaderSet>>): Json {
  const sets = codes.map((code) => {
    const set: HeaderSet = { 'Cache-Control': 'CacheControl', ...HEADERS_OF[code], ...extra[code] };
    if (!BEFORE_THE_APP.includes(code)) set['X-Request-Id'] = EVERY_ANSWER['X-Request-Id'];
    if (!BEFORE_THE_CHARGE.includes(code)) Object.assign(set, EVERY_ANSWER);
    return set;
  });
  const headers: Json = {};
  for (const name of new Set(sets.flatMap((set) => Object.keys(set)))) {
    const id = sets.map((set) => set[name]).find(Boolean) ?? EVERY_ANSWER[name]!;
    headers[name] = header(
      id,
      sets.every((set) => name in set),
    );
  }
  // Sent on some paths to these codes, never on all: still declared, as optional.
  for (const [name, id] of Object.entries(EVERY_ANSWER)) headers[name] ??= header(id!, false);
  for (const code of codes) {
    for (const [name, id] of Object.entries(SOMETIMES_OF[code] ?? {})) {
      headers[name] = header(id!, false);
    }
  }
  return headers;
}

/** Headers of a successful answer: the operation's own and those of every answer. */
export const successHeaders = (own: HeaderSet, optional: HeaderSet = {}): Json => ({
  ...Object.fromEntries(Object.entries({ ...own, ...EVERY_ANSWER }).map(([name, id]) => [name, header(id!)])),
  ...Object.fromEntries(Object.entries(optional).map(([name, id]) => [name, header(id!, false)])),
});

/** What a page of a list answers with (its `Link` to the next page, when there is one, is optional). */
export const PAGE_HEADERS: HeaderSet = { 'Cache-Control': 'CacheControl', Vary: 'Vary' };

/** A success answer with a JSON body: the headers it carries (beside every answer's) and the body's schema. */
export const jsonResponse = (description: string, schema: string, own: HeaderSet, optional: HeaderSet = {}) => ({
  description,
  headers: successHeaders(own, optional),
  content: { 'application/json': { schema: ref(`schemas/${schema}`) } },
});

/** Any operation can meet these: credentials, the rate budget, and failures on our side (nothing is changed then). */
const EVERY_OPERATION: readonly ApiErrorCode[] = [
  'UNAUTHENTICATED',
  'INSUFFICIENT_SCOPE',
  'FORBIDDEN',
  'RATE_LIMITED',
  'INTERNAL_SERVER_ERROR',
  'SERVICE_UNAVAILABLE',
];

const PROBLEM_CONTENT = { 'application/problem+json': { schema: ref('schemas/Problem') } };

/**
 * The error responses of an operation, one per status, from the catalogue: each lists the titles and codes
 * it stands for. `extraHeaders` adds headers that depend on the operation (the media type a 415 names).
 */
export function errorResponses(
  codes: readonly ApiErrorCode[],
  opts: {
    head?: boolean;
    extraHeaders?: Partial<Record<ApiErrorCode, HeaderSet>>;
  } = {},
): Record<string, Json> {
  const byStatus = new Map<number, ApiErrorCode[]>();
  for (const code of [...EVERY_OPERATION, ...codes]) {
    const status = PROBLEM_TYPES[code].status;
    const list = byStatus.get(status) ?? [];
    if (!list.includes(code)) list.push(code);
    byStatus.set(status, list);
  }
  const responses: Record<string, Json> = {};
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    const description =
      list.map((code) => `${PROBLEM_TYPES[code].title} (${code}).`).join(' ') + (opts.head ? HEAD_HAS_NO_BODY : '');
    responses[String(status)] = {
      description,
      headers: headersOfCodes(list, opts.extraHeaders ?? {}),
      content: PROBLEM_CONTENT,
    };
  }
  return responses;
}

/** RFC 9110 §9.3.2: HEAD answers with the headers GET would send, Content-Type included, and no body. */
export const HEAD_HAS_NO_BODY = ' HEAD sends the headers of this answer without its body.';

export const jsonBody = (schema: string, ...types: string[]) => ({
  required: true,
  content: Object.fromEntries(
    (types.length ? types : ['application/json']).map((type) => [type, { schema: ref(`schemas/${schema}`) }]),
  ),
});

/** Failures of reading a request body, on every operation that takes one. */
export const BODY_ERRORS: readonly ApiErrorCode[] = [
  'MALFORMED_REQUEST',
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
];

/** Every operation that answers with a representation refuses an Accept that allows no JSON (negotiation.ts). */
export const READ_ERRORS: readonly ApiErrorCode[] = ['NOT_ACCEPTABLE'];

export const CONDITIONAL_WRITE_ERRORS: readonly ApiErrorCode[] = [
  'MALFORMED_REQUEST',
  'NOT_FOUND',
  'PRECONDITION_FAILED',
  'PRECONDITION_REQUIRED',
  // Staff changing someone else's order without a recent second factor (step-up, RFC 9470).
  'INSUFFICIENT_USER_AUTHENTICATION',
];
