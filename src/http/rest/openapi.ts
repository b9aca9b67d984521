import { IDEMPOTENCY_KEY_PATTERN } from '../../domain/idempotencyKey.js';
import { ORDER_STATUSES } from '../../domain/model.js';
import { PAGE } from '../../domain/orderService.js';
import type { ApiErrorCode } from '../problems/index.js';
import {
  BODY_ERRORS,
  CONDITIONAL_WRITE_ERRORS,
  HEADERS,
  READ_ERRORS,
  componentSchemas,
  errorResponses,
  HEAD_HAS_NO_BODY,
  jsonBody,
  jsonResponse,
  PAGE_HEADERS,
  ref,
  successHeaders,
  type HeaderSet,
} from './openapiParts.js';
import { webhookPaths } from './openapiWebhooks.js';

/**
 * The OpenAPI 3.1 description of the REST endpoints, served at /v1/openapi.json and generated: schemas from the
 * zod contract (contract.ts), error responses from the error catalogue (problems/catalogue.ts). What is declared here is
 * only what neither holds: paths, parameters, headers and which errors each operation can answer.
 */

/** What a read or write of one order answers with: its representation, validator and caching rules. */
const ORDER_HEADERS: HeaderSet = { ETag: 'ETag', 'Cache-Control': 'CacheControl', Vary: 'Vary' };

const orderResponse = (description: string) => jsonResponse(description, 'Order', ORDER_HEADERS);

/** GET and HEAD of one order: a malformed id (not percent-encoded UTF-8) is 400, an unknown one 404. */
const ONE_ORDER_READ_ERRORS: readonly ApiErrorCode[] = [...READ_ERRORS, 'MALFORMED_REQUEST', 'NOT_FOUND'];

const paths = {
  '/orders': {
    get: {
      operationId: 'listOrders',
      summary: 'Orders, filtered and sorted, newest first by default (staff: all; customers: their own)',
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
          description:
            'Opaque; from `next_cursor` or the `Link` header. Valid only with the filters and `order` it was issued for.',
        },
        {
          name: 'status',
          in: 'query',
          schema: { type: 'string', pattern: `^(${ORDER_STATUSES.join('|')})(,(${ORDER_STATUSES.join('|')}))*$` },
          description: 'Orders in any of these statuses, comma-separated: `status=paid,shipped`.',
        },
        {
          name: 'created[gte]',
          in: 'query',
          schema: { type: 'string', format: 'date-time' },
          description: 'Orders created at or after this instant.',
        },
        {
          name: 'created[lt]',
          in: 'query',
          schema: { type: 'string', format: 'date-time' },
          description: 'Orders created before this instant.',
        },
        {
          name: 'customer_id',
          in: 'query',
          schema: { type: 'string', pattern: '^cus_[0-9a-z]{26}$' },
          description: "Staff: this customer's orders. A customer naming anyone but themselves gets an empty list.",
        },
        {
          name: 'sku',
          in: 'query',
          schema: { type: 'string', minLength: 1, maxLength: 64 },
          description: 'Orders with a line of this product.',
        },
        {
          name: 'order',
          in: 'query',
          schema: {
            type: 'string',
            enum: ['-created_at', 'created_at', '-updated_at', 'updated_at'],
            default: '-created_at',
          },
          description: 'The sort: a field, descending when prefixed with `-`; ties are broken by id.',
        },
      ],
      responses: {
        '200': jsonResponse('One page of orders.', 'OrderPage', PAGE_HEADERS, { Link: 'Link' }),
        ...errorResponses([...READ_ERRORS, 'MALFORMED_REQUEST']),
      },
    },
    post: {
      operationId: 'createOrder',
      summary: 'Place an order',
      parameters: [ref('parameters/IdempotencyKey')],
      requestBody: jsonBody('NewOrder'),
      responses: {
        '201': jsonResponse(
          'Created (or, with `Idempotent-Replayed: true`, the replay of the first response to this key).',
          'Order',
          { Location: 'Location', ETag: 'ETag', 'Cache-Control': 'CacheControl' },
          { 'Idempotent-Replayed': 'IdempotentReplayed' },
        ),
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
