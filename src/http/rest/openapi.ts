import { z } from 'zod';
import { IDEMPOTENCY_KEY_PATTERN } from '../../domain/idempotencyKey.js';
import { PAGE } from '../../domain/orderService.js';
import { PROBLEM_TYPES, type ApiErrorCode } from '../problems/index.js';
import { contract } from './contract.js';

/**
 * The OpenAPI 3.1 description of the REST endpoints, served at /v1/openapi.json and generated: schemas from the
 * zod contract (contract.ts), error responses from the error catalogue (problems.ts). What is declared here is
 * only what neither holds: paths, parameters, headers and which errors each operation can answer.
 */

type Json = Record<string, unknown>;

const ref = (name: string) => ({ $ref: `#/components/${name}` });

/** Zod writes a bare `.int()` as JavaScript's safe-integer range; that is a limit of the language, not the API. */
function withoutSafeIntegerBounds({ jsonSchema }: { jsonSchema: Json }) {
  if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
  if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
}

function componentSchemas(): Record<string, Json> {
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
const HEADERS = {
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
    description: 'rel="next" when more items follow.',
    schema: { type: 'string', pattern: '^<[^>]+>; rel="next"$', maxLength: 2048 },
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
const header = (id: HeaderId, always = true): Json =>
  always || !HEADERS[id].required ? ref(`headers/${id}`) : { ...HEADERS[id], required: false };

/** Response header names and the components that describe them. */
type HeaderSet = Partial<Record<string, HeaderId>>;

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
const successHeaders = (own: HeaderSet, optional: HeaderSet = {}): Json => ({
  ...Object.fromEntries(Object.entries({ ...own, ...EVERY_ANSWER }).map(([name, id]) => [name, header(id!)])),
  ...Object.fromEntries(Object.entries(optional).map(([name, id]) => [name, header(id!, false)])),
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
function errorResponses(
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
const HEAD_HAS_NO_BODY = ' HEAD sends the headers of this answer without its body.';

/** What a read or write of one order answers with: its representation, validator and caching rules. */
const ORDER_HEADERS: HeaderSet = { ETag: 'ETag', 'Cache-Control': 'CacheControl', Vary: 'Vary' };

const orderResponse = (description: string) => ({
  description,
  headers: successHeaders(ORDER_HEADERS),
  content: { 'application/json': { schema: ref('schemas/Order') } },
});

const jsonBody = (schema: string, ...types: string[]) => ({
  required: true,
  content: Object.fromEntries(
    (types.length ? types : ['application/json']).map((type) => [type, { schema: ref(`schemas/${schema}`) }]),
  ),
});

/** Failures of reading a request body, on every operation that takes one. */
const BODY_ERRORS: readonly ApiErrorCode[] = ['MALFORMED_REQUEST', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE'];

/** Every operation that answers with a representation refuses an Accept that allows no JSON (negotiation.ts). */
const READ_ERRORS: readonly ApiErrorCode[] = ['NOT_ACCEPTABLE'];

const CONDITIONAL_WRITE_ERRORS: readonly ApiErrorCode[] = [
  'MALFORMED_REQUEST',
  'NOT_FOUND',
  'PRECONDITION_FAILED',
  'PRECONDITION_REQUIRED',
  // Staff changing someone else's order without a recent second factor (step-up, RFC 9470).
  'INSUFFICIENT_USER_AUTHENTICATION',
];

/** GET and HEAD of one order: a malformed id (not percent-encoded UTF-8) is 400, an unknown one 404. */
const ONE_ORDER_READ_ERRORS: readonly ApiErrorCode[] = [...READ_ERRORS, 'MALFORMED_REQUEST', 'NOT_FOUND'];

const paths = {
  '/orders': {
    get: {
      operationId: 'listOrders',
      summary: 'Orders, newest first (staff: all; customers: their own)',
      parameters: [
        {
          name: 'limit',
          in: 'query',
          schema: { type: 'integer', minimum: 1, default: PAGE.default },
          description: `Values above ${PAGE.max} behave as ${PAGE.max}.`,
        },
        {
          name: 'cursor',
          in: 'query',
          schema: { type: 'string' },
          description: 'Opaque; from `next_cursor` or the `Link` header.',
        },
      ],
      responses: {
        '200': {
          description: 'One page of orders.',
          headers: successHeaders({ 'Cache-Control': 'CacheControl', Vary: 'Vary' }, { Link: 'Link' }),
          content: { 'application/json': { schema: ref('schemas/OrderPage') } },
        },
        ...errorResponses([...READ_ERRORS, 'MALFORMED_REQUEST']),
      },
    },
    post: {
      operationId: 'createOrder',
      summary: 'Place an order',
      parameters: [ref('parameters/IdempotencyKey')],
      requestBody: jsonBody('NewOrder'),
      responses: {
        '201': {
          description: 'Created (or, with `Idempotent-Replayed: true`, the replay of the first response to this key).',
          headers: successHeaders(
            { Location: 'Location', ETag: 'ETag', 'Cache-Control': 'CacheControl' },
            { 'Idempotent-Replayed': 'IdempotentReplayed' },
          ),
          content: { 'application/json': { schema: ref('schemas/Order') } },
        },
        ...errorResponses(
          [
            ...READ_ERRORS,
            ...BODY_ERRORS,
            'IDEMPOTENCY_KEY_REQUIRED',
            'NOT_FOUND',
            'IDEMPOTENCY_KEY_IN_USE',
            'BAD_USER_INPUT',
            'IDEMPOTENCY_KEY_REUSED',
            'INSUFFICIENT_USER_AUTHENTICATION',
          ],
          { extraHeaders: { UNSUPPORTED_MEDIA_TYPE: { 'Accept-Post': 'AcceptPost' } } },
        ),
      },
    },
  },
  '/orders/{id}': {
    parameters: [ref('parameters/OrderId')],
    get: {
      operationId: 'getOrder',
      summary: 'One order',
      parameters: [ref('parameters/IfNoneMatch')],
      responses: {
        '200': orderResponse('The order.'),
        '304': {
          description: 'Not modified: the If-None-Match ETag is current.',
          headers: successHeaders(ORDER_HEADERS),
        },
        ...errorResponses(ONE_ORDER_READ_ERRORS),
      },
    },
    head: {
      operationId: 'headOrder',
      summary: 'The headers of GET, without the body',
      parameters: [ref('parameters/IfNoneMatch')],
      responses: {
        '200': orderResponse(`The order exists.${HEAD_HAS_NO_BODY}`),
        '304': { description: 'Not modified.', headers: successHeaders(ORDER_HEADERS) },
        ...errorResponses(ONE_ORDER_READ_ERRORS, { head: true }),
      },
    },
    patch: {
      operationId: 'patchOrder',
      summary: 'Change the status (JSON merge patch, conditional)',
      parameters: [ref('parameters/IfMatchRequired'), ref('parameters/IfNoneMatchOnWrite')],
      requestBody: jsonBody('OrderPatch', 'application/merge-patch+json', 'application/json'),
      responses: {
        '200': orderResponse('The changed order.'),
        ...errorResponses(
          [...READ_ERRORS, ...BODY_ERRORS, ...CONDITIONAL_WRITE_ERRORS, 'INVALID_TRANSITION', 'BAD_USER_INPUT'],
          { extraHeaders: { UNSUPPORTED_MEDIA_TYPE: { 'Accept-Patch': 'AcceptPatch' } } },
        ),
      },
    },
    put: {
      operationId: 'replaceOrderItems',
      summary: 'Replace the items of a pending order (conditional)',
      parameters: [ref('parameters/IfMatchRequired'), ref('parameters/IfNoneMatchOnWrite')],
      requestBody: jsonBody('OrderItemsReplacement'),
      responses: {
        '200': orderResponse('The order with its new items.'),
        ...errorResponses(
          [...READ_ERRORS, ...BODY_ERRORS, ...CONDITIONAL_WRITE_ERRORS, 'NOT_EDITABLE', 'BAD_USER_INPUT'],
          { extraHeaders: { UNSUPPORTED_MEDIA_TYPE: { Accept: 'Accept' } } },
        ),
      },
    },
    delete: {
      operationId: 'deleteOrder',
      summary: 'Delete an order (staff only; If-Match honoured when sent)',
      parameters: [ref('parameters/IfMatchOptional'), ref('parameters/IfNoneMatchOnWrite')],
      responses: {
        '204': { description: 'Deleted.', headers: successHeaders({ 'Cache-Control': 'CacheControl' }) },
        ...errorResponses([
          'MALFORMED_REQUEST',
          'NOT_FOUND',
          'PRECONDITION_FAILED',
          'INSUFFICIENT_USER_AUTHENTICATION',
        ]),
      },
    },
  },
};

/** What a read or write of one webhook endpoint answers with. */
const ENDPOINT_HEADERS: HeaderSet = { ETag: 'WebhookETag', 'Cache-Control': 'CacheControl', Vary: 'Vary' };

const endpointResponse = (description: string) => ({
  description,
  headers: successHeaders(ENDPOINT_HEADERS),
  content: { 'application/json': { schema: ref('schemas/WebhookEndpoint') } },
});

const withSecretResponse = (description: string, own: HeaderSet) => ({
  description,
  headers: successHeaders(own),
  content: { 'application/json': { schema: ref('schemas/WebhookEndpointWithSecret') } },
});

const deliveryQueued = {
  description: 'Queued: the delivery as it is now; its attempt shows in the delivery log once made.',
  headers: successHeaders({ 'Cache-Control': 'CacheControl' }),
  content: { 'application/json': { schema: ref('schemas/WebhookDelivery') } },
};

const pageParameters = (what: string) => [
  {
    name: 'limit',
    in: 'query',
    schema: { type: 'integer', minimum: 1, default: PAGE.default },
    description: `How many ${what}; values above ${PAGE.max} behave as ${PAGE.max}.`,
  },
  {
    name: 'cursor',
    in: 'query',
    schema: { type: 'string', maxLength: 200 },
    description: 'Opaque; from `next_cursor` or the `Link` header.',
  },
];

/** Staff managing their endpoints need a recent second factor, like every staff write (RFC 9470). */
const ENDPOINT_WRITE_ERRORS: readonly ApiErrorCode[] = [
  ...READ_ERRORS,
  'MALFORMED_REQUEST',
  'NOT_FOUND',
  'INSUFFICIENT_USER_AUTHENTICATION',
];

const webhookPaths = {
  '/webhook-endpoints': {
    get: {
      operationId: 'listWebhookEndpoints',
      summary: "The caller's webhook endpoints, newest first",
      parameters: pageParameters('endpoints'),
      responses: {
        '200': {
          description: 'One page of endpoints (without their secrets).',
          headers: successHeaders({ 'Cache-Control': 'CacheControl', Vary: 'Vary' }, { Link: 'Link' }),
          content: { 'application/json': { schema: ref('schemas/WebhookEndpointPage') } },
        },
        ...errorResponses([...READ_ERRORS, 'MALFORMED_REQUEST']),
      },
    },
    post: {
      operationId: 'createWebhookEndpoint',
      summary: 'Register an endpoint: it receives the order events its owner may read (at most 20 per owner)',
      requestBody: jsonBody('NewWebhookEndpoint'),
      responses: {
        '201': withSecretResponse('Created; the secret is shown here and after a rotation only.', {
          Location: 'WebhookLocation',
          ETag: 'WebhookETag',
          'Cache-Control': 'CacheControl',
        }),
        ...errorResponses([...READ_ERRORS, ...BODY_ERRORS, 'BAD_USER_INPUT', 'INSUFFICIENT_USER_AUTHENTICATION'], {
          extraHeaders: { UNSUPPORTED_MEDIA_TYPE: { 'Accept-Post': 'AcceptPost' } },
        }),
      },
    },
  },
  '/webhook-endpoints/{id}': {
    parameters: [ref('parameters/WebhookEndpointId')],
    get: {
      operationId: 'getWebhookEndpoint',
      summary: 'One of your webhook endpoints',
      responses: {
        '200': endpointResponse('The endpoint (without its secret).'),
        ...errorResponses([...READ_ERRORS, 'MALFORMED_REQUEST', 'NOT_FOUND']),
      },
    },
    head: {
      operationId: 'headWebhookEndpoint',
      summary: 'The headers of GET, without the body',
      responses: {
        '200': endpointResponse(`The endpoint exists.${HEAD_HAS_NO_BODY}`),
        ...errorResponses([...READ_ERRORS, 'MALFORMED_REQUEST', 'NOT_FOUND'], { head: true }),
      },
    },
    patch: {
      operationId: 'patchWebhookEndpoint',
      summary: 'Change the URL, events, description or enabled (JSON merge patch, conditional)',
      parameters: [ref('parameters/IfMatchRequired'), ref('parameters/IfNoneMatchOnWrite')],
      requestBody: jsonBody('WebhookEndpointPatch', 'application/merge-patch+json', 'application/json'),
      responses: {
        '200': endpointResponse('The changed endpoint.'),
        ...errorResponses([...READ_ERRORS, ...BODY_ERRORS, ...CONDITIONAL_WRITE_ERRORS, 'BAD_USER_INPUT'], {
          extraHeaders: { UNSUPPORTED_MEDIA_TYPE: { 'Accept-Patch': 'AcceptPatch' } },
        }),
      },
    },
    delete: {
      operationId: 'deleteWebhookEndpoint',
      summary: 'Remove the endpoint and its delivery log (If-Match honoured when sent)',
      parameters: [ref('parameters/IfMatchOptional'), ref('parameters/IfNoneMatchOnWrite')],
      responses: {
        '204': { description: 'Deleted.', headers: successHeaders({ 'Cache-Control': 'CacheControl' }) },
        ...errorResponses([
          'MALFORMED_REQUEST',
          'NOT_FOUND',
          'PRECONDITION_FAILED',
          'INSUFFICIENT_USER_AUTHENTICATION',
        ]),
      },
    },
  },
  '/webhook-endpoints/{id}/rotate-secret': {
    parameters: [ref('parameters/WebhookEndpointId')],
    post: {
      operationId: 'rotateWebhookEndpointSecret',
      summary: 'A new secret; the old one stays valid for 24 hours, and both sign every message meanwhile',
      parameters: [ref('parameters/IfMatchOptional'), ref('parameters/IfNoneMatchOnWrite')],
      responses: {
        '200': withSecretResponse('The endpoint with its new secret, shown here only.', {
          ETag: 'WebhookETag',
          'Cache-Control': 'CacheControl',
        }),
        ...errorResponses([...ENDPOINT_WRITE_ERRORS, 'PRECONDITION_FAILED']),
      },
    },
  },
  '/webhook-endpoints/{id}/deliveries': {
    parameters: [ref('parameters/WebhookEndpointId')],
    get: {
      operationId: 'listWebhookDeliveries',
      summary: 'The delivery log: each message, newest first, with its attempts',
      parameters: pageParameters('messages'),
      responses: {
        '200': {
          description: 'One page of deliveries.',
          headers: successHeaders({ 'Cache-Control': 'CacheControl', Vary: 'Vary' }, { Link: 'Link' }),
          content: { 'application/json': { schema: ref('schemas/WebhookDeliveryPage') } },
        },
        ...errorResponses([...READ_ERRORS, 'MALFORMED_REQUEST', 'NOT_FOUND']),
      },
    },
  },
  '/webhook-endpoints/{id}/deliveries/{deliveryId}/retry': {
    parameters: [
      ref('parameters/WebhookEndpointId'),
      { name: 'deliveryId', in: 'path', required: true, schema: { type: 'string', maxLength: 64 } },
    ],
    post: {
      operationId: 'retryWebhookDelivery',
      summary: 'Send a message once more, now, with the same webhook-id',
      responses: { '202': deliveryQueued, ...errorResponses(ENDPOINT_WRITE_ERRORS) },
    },
  },
  '/webhook-endpoints/{id}/ping': {
    parameters: [ref('parameters/WebhookEndpointId')],
    post: {
      operationId: 'pingWebhookEndpoint',
      summary: 'Send a `ping` message to the endpoint',
      responses: { '202': deliveryQueued, ...errorResponses(ENDPOINT_WRITE_ERRORS) },
    },
  },
};

export const openapiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Orders API',
    version: '1.0.0',
    description:
      'Orders as HTTP resources. Every request carries `Authorization: Bearer <access token>` (or, for a ' +
      'DPoP-bound token, `Authorization: DPoP <access token>` and a `DPoP` proof, RFC 9449). Errors are ' +
      '`application/problem+json` (RFC 9457); each `type` URI is a page describing the problem. Money is in ' +
      'integer minor units (cents).',
  },
  // Public: the same API for every client (OWASP API9, inventory).
  servers: [{ url: '/v1', 'x-internal': false }],
  security: [{ bearer: [] }, { dpop: [] }],
  paths: { ...paths, ...webhookPaths },
  components: {
    securitySchemes: {
      bearer: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'JWT',
        description:
          'A signed JWT access token from the OIDC issuer, verified as RFC8725 (JWT best current practices) ' +
          "advises: asymmetric algorithms from a fixed list (never `none`), the key from the issuer's JWKS, " +
          '`iss` and `aud` checked, `exp` required and `nbf` honoured.',
      },
      // RFC 9449: a DPoP-bound token, with a `DPoP` proof header on every request.
      dpop: { type: 'http', scheme: 'dpop' },
    },
    parameters: {
      OrderId: { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
      WebhookEndpointId: { name: 'id', in: 'path', required: true, schema: { type: 'string', maxLength: 64 } },
      IdempotencyKey: {
        name: 'Idempotency-Key',
        in: 'header',
        required: true,
        description:
          'Unique per intended order; a retry with the same key and body replays the first response (24 hours).',
        schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN.source },
      },
      IfMatchRequired: { name: 'If-Match', in: 'header', required: true, schema: { type: 'string' } },
      IfMatchOptional: { name: 'If-Match', in: 'header', required: false, schema: { type: 'string' } },
      IfNoneMatch: { name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' } },
      IfNoneMatchOnWrite: {
        name: 'If-None-Match',
        in: 'header',
        required: false,
        description:
          'Honoured as RFC 9110 §13.1.2 asks: `*`, or a tag matching the current one (compared weakly), fails with 412.',
        schema: { type: 'string' },
      },
    },
    headers: HEADERS,
    schemas: componentSchemas(),
  },
};
