import { z } from 'zod';
import { IDEMPOTENCY_KEY_PATTERN } from '../../domain/idempotencyKey.js';
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

/** Headers that come with an error code wherever it is answered. */
const HEADERS_OF: Partial<Record<ApiErrorCode, Json>> = {
  UNAUTHENTICATED: { 'WWW-Authenticate': ref('headers/WWWAuthenticate') },
  INSUFFICIENT_USER_AUTHENTICATION: { 'WWW-Authenticate': ref('headers/WWWAuthenticate') },
  RATE_LIMITED: {
    'Retry-After': ref('headers/RetryAfter'),
    RateLimit: ref('headers/RateLimit'),
    'RateLimit-Policy': ref('headers/RateLimitPolicy'),
  },
  IDEMPOTENCY_KEY_IN_USE: { 'Retry-After': ref('headers/RetryAfter') },
};

/** Any operation can meet these: credentials, the rate budget, and failures on our side (nothing is changed then). */
const EVERY_OPERATION: readonly ApiErrorCode[] = [
  'UNAUTHENTICATED',
  'INSUFFICIENT_SCOPE',
  'FORBIDDEN',
  'RATE_LIMITED',
  'INTERNAL_SERVER_ERROR',
  'SERVICE_UNAVAILABLE',
];

/**
 * The error responses of an operation, one per status, from the catalogue: each lists the titles and codes
 * it stands for. `extraHeaders` adds headers that depend on the operation (the media type a 415 names).
 */
function errorResponses(
  codes: readonly ApiErrorCode[],
  opts: { body?: boolean; extraHeaders?: Partial<Record<ApiErrorCode, Json>> } = {},
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
    const description = list.map((code) => `${PROBLEM_TYPES[code].title} (${code}).`).join(' ');
    if (opts.body === false) {
      responses[String(status)] = { description };
      continue;
    }
    // A header is required only when every code of this status sends it.
    const headers: Json = {};
    const headerSets = list.map((code) => ({ ...HEADERS_OF[code], ...opts.extraHeaders?.[code] }));
    for (const set of headerSets) {
      for (const [name, header] of Object.entries(set)) {
        if (!headerSets.every((other) => name in other)) continue;
        headers[name] = header;
      }
    }
    responses[String(status)] = {
      description,
      headers,
      content: { 'application/problem+json': { schema: ref('schemas/Problem') } },
    };
  }
  return responses;
}

const orderResponse = (description: string) => ({
  description,
  headers: { ETag: ref('headers/ETag'), 'Cache-Control': ref('headers/CacheControl') },
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

const CONDITIONAL_WRITE_ERRORS: readonly ApiErrorCode[] = [
  'MALFORMED_REQUEST',
  'NOT_FOUND',
  'PRECONDITION_FAILED',
  'PRECONDITION_REQUIRED',
  // Staff changing someone else's order without a recent second factor (step-up, RFC 9470).
  'INSUFFICIENT_USER_AUTHENTICATION',
];

const paths = {
  '/orders': {
    get: {
      operationId: 'listOrders',
      summary: 'Orders, newest first (staff: all; customers: their own)',
      parameters: [
        {
          name: 'limit',
          in: 'query',
          schema: { type: 'integer', minimum: 1, default: 20 },
          description: 'Values above 100 behave as 100.',
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
          headers: { Link: ref('headers/Link'), 'Cache-Control': ref('headers/CacheControl') },
          content: { 'application/json': { schema: ref('schemas/OrderPage') } },
        },
        ...errorResponses(['MALFORMED_REQUEST']),
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
          headers: {
            Location: { required: true, schema: { type: 'string', pattern: '^/v1/orders/ord_[0-9a-z]{26}$' } },
            ETag: ref('headers/ETag'),
            'Idempotent-Replayed': { schema: { const: 'true' } },
          },
          content: { 'application/json': { schema: ref('schemas/Order') } },
        },
        ...errorResponses([
          ...BODY_ERRORS,
          'IDEMPOTENCY_KEY_REQUIRED',
          'NOT_FOUND',
          'IDEMPOTENCY_KEY_IN_USE',
          'BAD_USER_INPUT',
          'IDEMPOTENCY_KEY_REUSED',
          'INSUFFICIENT_USER_AUTHENTICATION',
        ]),
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
          headers: { ETag: ref('headers/ETag') },
        },
        ...errorResponses(['NOT_FOUND']),
      },
    },
    head: {
      operationId: 'headOrder',
      summary: 'The headers of GET, without the body',
      parameters: [ref('parameters/IfNoneMatch')],
      responses: {
        '200': { description: 'The order exists.', headers: { ETag: ref('headers/ETag') } },
        '304': { description: 'Not modified.', headers: { ETag: ref('headers/ETag') } },
        ...errorResponses(['NOT_FOUND'], { body: false }),
      },
    },
    patch: {
      operationId: 'patchOrder',
      summary: 'Change the status (JSON merge patch, conditional)',
      parameters: [ref('parameters/IfMatchRequired')],
      requestBody: jsonBody('OrderPatch', 'application/merge-patch+json', 'application/json'),
      responses: {
        '200': orderResponse('The changed order.'),
        ...errorResponses([...BODY_ERRORS, ...CONDITIONAL_WRITE_ERRORS, 'INVALID_TRANSITION', 'BAD_USER_INPUT'], {
          extraHeaders: { UNSUPPORTED_MEDIA_TYPE: { 'Accept-Patch': ref('headers/AcceptPatch') } },
        }),
      },
    },
    put: {
      operationId: 'replaceOrderItems',
      summary: 'Replace the items of a pending order (conditional)',
      parameters: [ref('parameters/IfMatchRequired')],
      requestBody: jsonBody('OrderItemsReplacement'),
      responses: {
        '200': orderResponse('The order with its new items.'),
        ...errorResponses([...BODY_ERRORS, ...CONDITIONAL_WRITE_ERRORS, 'NOT_EDITABLE', 'BAD_USER_INPUT']),
      },
    },
    delete: {
      operationId: 'deleteOrder',
      summary: 'Delete an order (staff only; If-Match honoured when sent)',
      parameters: [ref('parameters/IfMatchOptional')],
      responses: {
        '204': { description: 'Deleted.' },
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
  servers: [{ url: '/v1' }],
  security: [{ bearer: [] }, { dpop: [] }],
  paths,
  components: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
      // RFC 9449: a DPoP-bound token, with a `DPoP` proof header on every request.
      dpop: { type: 'http', scheme: 'dpop' },
    },
    parameters: {
      OrderId: { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
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
    },
    headers: {
      ETag: {
        required: true,
        description: 'Strong validator; changes with every write.',
        schema: { type: 'string', pattern: '^"ord_[0-9a-z]{26}\\.v[0-9]+"$' },
      },
      CacheControl: { required: true, schema: { type: 'string' } },
      Link: {
        required: false,
        description: 'rel="next" when more orders follow.',
        schema: { type: 'string', pattern: '^<[^>]+>; rel="next"$' },
      },
      WWWAuthenticate: { required: true, schema: { type: 'string', pattern: '^(Bearer|DPoP) ' } },
      AcceptPatch: { required: true, schema: { const: 'application/merge-patch+json, application/json' } },
      RetryAfter: { required: true, schema: { type: 'string', pattern: '^[0-9]+$' } },
      RateLimit: {
        required: true,
        description: 'What is left of the budget and seconds until it refills (IETF httpapi RateLimit fields draft).',
        schema: { type: 'string', pattern: '^"orders";r=[0-9]+;t=[0-9]+$' },
      },
      RateLimitPolicy: {
        required: true,
        description: 'Points per window and the window in seconds.',
        schema: { type: 'string', pattern: '^"orders";q=[0-9]+;w=[0-9]+$' },
      },
    },
    schemas: componentSchemas(),
  },
};
