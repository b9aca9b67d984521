/**
 * The OpenAPI 3.1 description of the REST endpoints, served at /v1/openapi.json. The test suite
 * validates it and checks every REST response it receives against it, so it cannot drift.
 */

const problem = (description: string, headers: Record<string, unknown> = {}) => ({
  description,
  headers,
  content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
});

const ref = (name: string) => ({ $ref: `#/components/${name}` });

/** Any operation can meet these: credentials, and failures on our side (nothing is changed then). */
const authErrors = {
  '401': problem('No, or an invalid, access token.', { 'WWW-Authenticate': ref('headers/WWWAuthenticate') }),
  '403': problem('The token lacks the scope, or the role does not allow the action.'),
  '429': problem('The client has spent its rate budget for this window; nothing was done.', {
    'Retry-After': ref('headers/RetryAfter'),
    RateLimit: ref('headers/RateLimit'),
    'RateLimit-Policy': ref('headers/RateLimitPolicy'),
  }),
  '500': problem('An unexpected failure; nothing was changed. Quote the X-Request-Id.'),
  '503': problem('Starting, draining, or the identity provider cannot be reached.'),
};

const orderResponse = (description: string) => ({
  description,
  headers: { ETag: ref('headers/ETag'), 'Cache-Control': ref('headers/CacheControl') },
  content: { 'application/json': { schema: ref('schemas/Order') } },
});

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
  paths: {
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
          '400': problem('limit or cursor is malformed.'),
          ...authErrors,
        },
      },
      post: {
        operationId: 'createOrder',
        summary: 'Place an order',
        parameters: [ref('parameters/IdempotencyKey')],
        requestBody: { required: true, content: { 'application/json': { schema: ref('schemas/NewOrder') } } },
        responses: {
          '201': {
            description:
              'Created (or, with `Idempotent-Replayed: true`, the replay of the first response to this key).',
            headers: {
              Location: { required: true, schema: { type: 'string', pattern: '^/v1/orders/ord_[0-9a-z]{26}$' } },
              ETag: ref('headers/ETag'),
              'Idempotent-Replayed': { schema: { const: 'true' } },
            },
            content: { 'application/json': { schema: ref('schemas/Order') } },
          },
          '400': problem('Idempotency-Key missing or malformed, or the body is not JSON.'),
          ...authErrors,
          '404': problem('A replayed key whose order has since been deleted.'),
          '409': problem('A request with this Idempotency-Key is still in flight.', {
            'Retry-After': ref('headers/RetryAfter'),
          }),
          '413': problem('The body is larger than 64 kB.'),
          '415': problem('The body is not application/json.'),
          '422': problem('Invalid fields (each with a JSON pointer), or the key was used with another body.'),
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
          ...authErrors,
          '404': problem('No such order, or not yours.'),
        },
      },
      head: {
        operationId: 'headOrder',
        summary: 'The headers of GET, without the body',
        parameters: [ref('parameters/IfNoneMatch')],
        responses: {
          '200': { description: 'The order exists.', headers: { ETag: ref('headers/ETag') } },
          '304': { description: 'Not modified.', headers: { ETag: ref('headers/ETag') } },
          '401': { description: 'No, or an invalid, access token.' },
          '403': { description: 'Insufficient scope.' },
          '404': { description: 'No such order, or not yours.' },
          '500': { description: 'An unexpected failure.' },
        },
      },
      patch: {
        operationId: 'patchOrder',
        summary: 'Change the status (JSON merge patch, conditional)',
        parameters: [ref('parameters/IfMatchRequired')],
        requestBody: {
          required: true,
          content: {
            'application/merge-patch+json': { schema: ref('schemas/OrderPatch') },
            'application/json': { schema: ref('schemas/OrderPatch') },
          },
        },
        responses: {
          '200': orderResponse('The changed order.'),
          '400': problem('The body is not JSON, or If-Match is malformed.'),
          ...authErrors,
          '404': problem('No such order, or not yours.'),
          '409': problem('The status cannot move that way.'),
          '412': problem('The order changed since the If-Match ETag.'),
          '413': problem('The body is larger than 64 kB.'),
          '415': problem('The body is neither application/merge-patch+json nor application/json.', {
            'Accept-Patch': ref('headers/AcceptPatch'),
          }),
          '422': problem('Read-only or unknown members, or an invalid status.'),
          '428': problem('If-Match is missing.'),
        },
      },
      put: {
        operationId: 'replaceOrderItems',
        summary: 'Replace the items of a pending order (conditional)',
        parameters: [ref('parameters/IfMatchRequired')],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: ref('schemas/OrderItemsReplacement') } },
        },
        responses: {
          '200': orderResponse('The order with its new items.'),
          '400': problem('The body is not JSON, or If-Match is malformed.'),
          ...authErrors,
          '404': problem('No such order, or not yours.'),
          '409': problem('The order is no longer pending.'),
          '412': problem('The order changed since the If-Match ETag.'),
          '413': problem('The body is larger than 64 kB.'),
          '415': problem('The body is not application/json.'),
          '422': problem('Invalid items, or read-only or unknown members.'),
          '428': problem('If-Match is missing.'),
        },
      },
      delete: {
        operationId: 'deleteOrder',
        summary: 'Delete an order (staff only; If-Match honoured when sent)',
        parameters: [ref('parameters/IfMatchOptional')],
        responses: {
          '204': { description: 'Deleted.' },
          '400': problem('If-Match is malformed.'),
          ...authErrors,
          '404': problem('No such order, or not yours.'),
          '412': problem('The order changed since the If-Match ETag.'),
        },
      },
    },
  },
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
        schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
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
    schemas: {
      Status: { type: 'string', enum: ['pending', 'paid', 'shipped', 'delivered', 'cancelled'] },
      OrderItem: {
        type: 'object',
        additionalProperties: false,
        required: ['sku', 'qty', 'unit_price_cents', 'line_total_cents'],
        properties: {
          sku: { type: 'string' },
          qty: { type: 'integer', minimum: 1, maximum: 999 },
          unit_price_cents: { type: 'integer', minimum: 1 },
          line_total_cents: { type: 'integer', minimum: 1 },
        },
      },
      Order: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'customer_id', 'status', 'items', 'total_cents', 'created_at', 'updated_at'],
        properties: {
          id: { type: 'string', pattern: '^ord_[0-9a-z]{26}$' },
          customer_id: { type: 'string', pattern: '^cus_[0-9a-z]{26}$' },
          status: { $ref: '#/components/schemas/Status' },
          items: { type: 'array', minItems: 1, maxItems: 100, items: { $ref: '#/components/schemas/OrderItem' } },
          total_cents: { type: 'integer', minimum: 0 },
          created_at: { type: 'string', format: 'date-time' },
          updated_at: { type: 'string', format: 'date-time' },
        },
      },
      OrderPage: {
        type: 'object',
        additionalProperties: false,
        required: ['orders', 'next_cursor'],
        properties: {
          orders: { type: 'array', items: { $ref: '#/components/schemas/Order' } },
          next_cursor: { type: ['string', 'null'] },
        },
      },
      NewOrderLine: {
        type: 'object',
        additionalProperties: false,
        required: ['sku', 'qty'],
        properties: { sku: { type: 'string' }, qty: { type: 'integer', minimum: 1, maximum: 999 } },
      },
      NewOrder: {
        type: 'object',
        additionalProperties: false,
        required: ['items'],
        properties: {
          customer_id: { type: ['string', 'null'], description: 'Staff only; customers omit it or name themselves.' },
          items: { type: 'array', minItems: 1, maxItems: 100, items: { $ref: '#/components/schemas/NewOrderLine' } },
        },
      },
      OrderItemsReplacement: {
        type: 'object',
        additionalProperties: false,
        required: ['items'],
        properties: {
          items: { type: 'array', minItems: 1, maxItems: 100, items: { $ref: '#/components/schemas/NewOrderLine' } },
        },
      },
      OrderPatch: {
        type: 'object',
        additionalProperties: false,
        properties: { status: { $ref: '#/components/schemas/Status' } },
      },
      Problem: {
        type: 'object',
        required: ['type', 'title', 'status', 'detail', 'instance', 'code'],
        properties: {
          type: { type: 'string', format: 'uri-reference' },
          title: { type: 'string' },
          status: { type: 'integer', minimum: 400, maximum: 599 },
          detail: { type: 'string' },
          instance: { type: 'string', format: 'uri-reference' },
          code: { type: 'string', description: 'The same code GraphQL puts in extensions.code.' },
          errors: {
            type: 'array',
            items: {
              type: 'object',
              required: ['pointer', 'reason'],
              properties: { pointer: { type: 'string' }, reason: { type: 'string' } },
            },
          },
        },
      },
    },
  },
} as const;
