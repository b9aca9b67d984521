import { PAGE } from '../../domain/orderService.js';
import type { ApiErrorCode } from '../problems/index.js';
import {
  BODY_ERRORS,
  CONDITIONAL_WRITE_ERRORS,
  READ_ERRORS,
  errorResponses,
  HEAD_HAS_NO_BODY,
  jsonBody,
  jsonResponse,
  PAGE_HEADERS,
  ref,
  successHeaders,
  type HeaderSet,
} from './openapiParts.js';

/** The /webhook-endpoints paths of the OpenAPI document (openapi.ts assembles it). */

/** What a read or write of one webhook endpoint answers with. */
const ENDPOINT_HEADERS: HeaderSet = { ETag: 'WebhookETag', 'Cache-Control': 'CacheControl', Vary: 'Vary' };

const endpointResponse = (description: string) => jsonResponse(description, 'WebhookEndpoint', ENDPOINT_HEADERS);

const withSecretResponse = (description: string, own: HeaderSet) =>
  jsonResponse(description, 'WebhookEndpointWithSecret', own);

const deliveryQueued = jsonResponse(
  'Queued: the delivery as it is now; its attempt shows in the delivery log once made.',
  'WebhookDelivery',
  { 'Cache-Control': 'CacheControl' },
);

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

export const webhookPaths = {
  '/webhook-endpoints': {
    get: {
      operationId: 'listWebhookEndpoints',
      summary: "The caller's webhook endpoints (staff: everyone's), newest first",
      parameters: pageParameters('endpoints'),
      responses: {
        '200': jsonResponse('One page of endpoints (without their secrets).', 'WebhookEndpointPage', PAGE_HEADERS, {
          Link: 'Link',
        }),
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
        '200': jsonResponse('One page of deliveries.', 'WebhookDeliveryPage', PAGE_HEADERS, { Link: 'Link' }),
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
