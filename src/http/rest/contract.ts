import { z } from 'zod';
import { MAX_LISTED_INVALID } from '../../domain/errors.js';
import { ORDER_STATUSES } from '../../domain/model.js';
import { PAGE } from '../../domain/orderService.js';
import { ORDER_LIMITS } from '../../domain/orders.js';
import { WEBHOOK_EVENT_TYPES, WEBHOOK_LIMITS } from '../../domain/webhooks.js';

/**
 * The REST contract as zod schemas: request bodies are parsed with them, representations are typed by them,
 * and the OpenAPI document (openapi.ts) is generated from them. Schemas registered with an `id` become
 * components; other metadata is merged into the schema's JSON Schema.
 *
 * Request schemas check structure only: the domain checks quantities, line counts and SKUs and reports each
 * failure with its own pointer and reason. Their bounds are documented here from the domain's ORDER_LIMITS.
 */
export interface ContractMeta {
  id?: string;
  description?: string;
  [keyword: string]: unknown;
}

export const contract = z.registry<ContractMeta>();

const documented = <T extends z.ZodType>(schema: T, meta: ContractMeta): T => {
  contract.add(schema, meta);
  return schema;
};

const ORDER_ID = '^ord_[0-9a-z]{26}$';
const CUSTOMER_ID = '^cus_[0-9a-z]{26}$';
const dateTime = () => documented(z.string(), { format: 'date-time' });

// ---- Request bodies ----------------------------------------------------------------------------------------

const qty = documented(z.number().int(), {
  format: 'int32',
  minimum: ORDER_LIMITS.minQty,
  maximum: ORDER_LIMITS.maxQty,
});

/** An amount the server computed: no line, and so no price, exceeds what a whole order may total. */
const cents = (minimum: number) =>
  documented(z.number().int(), { format: 'int32', minimum, maximum: ORDER_LIMITS.maxTotalCents });

export const NewOrderLine = documented(
  z.strictObject({
    // The length bound only keeps error messages small: a SKU of any length that the catalogue lacks is a 422.
    sku: documented(z.string().min(1).max(64), { minLength: undefined, maxLength: undefined }),
    qty,
  }),
  { id: 'NewOrderLine' },
);

/** At most this many lines are read at all; the domain then allows 1 to ORDER_LIMITS.maxLines of them. */
const MAX_PARSED_LINES = 1000;

const lines = documented(z.array(NewOrderLine).max(MAX_PARSED_LINES), {
  minItems: ORDER_LIMITS.minLines,
  maxItems: ORDER_LIMITS.maxLines,
});

export const NewOrder = documented(
  z.strictObject({
    customer_id: documented(z.string().nullable().optional(), {
      description: 'Staff only; customers omit it or name themselves.',
    }),
    items: lines,
  }),
  { id: 'NewOrder' },
);

export const OrderItemsReplacement = documented(z.strictObject({ items: lines }), { id: 'OrderItemsReplacement' });

export const Status = documented(z.enum(ORDER_STATUSES), { id: 'Status' });

export const OrderPatch = documented(
  z.strictObject({
    // Any string parses; the domain names the allowed values when one is not (422 with /status).
    status: documented(z.string({ error: 'must be a status string; it cannot be removed' }).optional(), {
      enum: [...ORDER_STATUSES],
    }),
  }),
  { id: 'OrderPatch' },
);

// ---- Representations -----------------------------------------------------------------------------------------

export const OrderItem = documented(
  z.strictObject({
    sku: z.string(),
    qty,
    unit_price_cents: cents(1),
    line_total_cents: cents(1),
  }),
  { id: 'OrderItem' },
);

export const Order = documented(
  z.strictObject({
    id: documented(z.string(), { pattern: ORDER_ID }),
    customer_id: documented(z.string(), { pattern: CUSTOMER_ID }),
    status: Status,
    items: documented(z.array(OrderItem), { minItems: ORDER_LIMITS.minLines, maxItems: ORDER_LIMITS.maxLines }),
    total_cents: cents(0),
    created_at: dateTime(),
    updated_at: dateTime(),
  }),
  { id: 'Order' },
);

export const OrderPage = documented(
  z.strictObject({
    orders: documented(z.array(Order), { maxItems: PAGE.max }),
    next_cursor: z.string().nullable(),
  }),
  { id: 'OrderPage' },
);

export const Problem = documented(
  z.object({
    type: documented(z.string(), { format: 'uri-reference' }),
    title: z.string(),
    status: documented(z.number().int(), { format: 'int32', minimum: 400, maximum: 599 }),
    detail: z.string(),
    instance: documented(z.string(), { format: 'uri-reference' }),
    code: documented(z.string(), { description: 'The same code GraphQL puts in extensions.code.' }),
    errors: documented(z.array(z.object({ pointer: z.string(), reason: z.string() })), {
      description: `Each invalid field (at most ${MAX_LISTED_INVALID}), with a JSON pointer into the request.`,
      maxItems: MAX_LISTED_INVALID,
    }).optional(),
    traceId: documented(z.string().regex(/^[0-9a-f]{32}$/), {
      description:
        'The W3C trace id of the request, when the server runs with tracing on: quote it in a bug report to find the trace.',
    }).optional(),
    acrValues: documented(z.string(), {
      description:
        'INSUFFICIENT_USER_AUTHENTICATION: the acr_values to sign in again with (space-separated), as in WWW-Authenticate.',
    }).optional(),
    maxAge: documented(z.number().int(), {
      description: 'INSUFFICIENT_USER_AUTHENTICATION: the max_age (seconds) to sign in again with.',
      format: 'int32',
      minimum: 1,
      maximum: 86_400,
    }).optional(),
  }),
  { id: 'Problem' },
);

// ---- Webhook endpoints ---------------------------------------------------------------------------------------

const ENDPOINT_ID = '^we_[0-9a-z]{26}$';
const MESSAGE_ID = '^msg_[0-9a-z]{26}$';
/** At most this many event types are read at all; the domain names each unknown one. */
const MAX_PARSED_EVENTS = 20;

const webhookUrl = documented(z.string(), {
  format: 'uri',
  maxLength: WEBHOOK_LIMITS.maxUrlLength,
  description:
    'Where messages are POSTed: https (http only where WEBHOOK_ALLOW_PRIVATE_URLS is on), without credentials or ' +
    'fragment, resolving to public addresses only.',
});
const eventTypes = documented(z.array(z.string()).max(MAX_PARSED_EVENTS), {
  items: { type: 'string', enum: [...WEBHOOK_EVENT_TYPES] },
  minItems: 1,
  maxItems: WEBHOOK_EVENT_TYPES.length,
  uniqueItems: true,
});
const description = documented(z.string().nullable(), { maxLength: WEBHOOK_LIMITS.maxDescriptionLength });

export const NewWebhookEndpoint = documented(
  z.strictObject({ url: webhookUrl, events: eventTypes, description: description.optional() }),
  { id: 'NewWebhookEndpoint' },
);

export const WebhookEndpointPatch = documented(
  z.strictObject({
    url: webhookUrl.optional(),
    events: eventTypes.optional(),
    description: description.optional(),
    enabled: documented(z.boolean().optional(), {
      description: 'false pauses deliveries; true resumes them, also after the service disabled the endpoint.',
    }),
  }),
  { id: 'WebhookEndpointPatch' },
);

const endpointMembers = {
  id: documented(z.string(), { pattern: ENDPOINT_ID }),
  url: documented(z.string(), { format: 'uri', maxLength: WEBHOOK_LIMITS.maxUrlLength }),
  events: documented(z.array(z.enum(WEBHOOK_EVENT_TYPES)), { minItems: 1, maxItems: WEBHOOK_EVENT_TYPES.length }),
  description: documented(z.string().nullable(), { maxLength: WEBHOOK_LIMITS.maxDescriptionLength }),
  enabled: z.boolean(),
  disabled_reason: documented(z.string().nullable(), {
    description: 'Why the service disabled the endpoint (it failed continuously for WEBHOOK_DISABLE_AFTER_S).',
    maxLength: 200,
  }),
  created_at: dateTime(),
  updated_at: dateTime(),
};

export const WebhookEndpoint = documented(z.strictObject(endpointMembers), { id: 'WebhookEndpoint' });

export const WebhookEndpointWithSecret = documented(
  z.strictObject({
    ...endpointMembers,
    secret: documented(z.string(), {
      pattern: '^whsec_[A-Za-z0-9+/]+={0,2}$',
      maxLength: 128,
      description: 'The signing secret (Standard Webhooks): shown only in this answer.',
    }),
  }),
  { id: 'WebhookEndpointWithSecret' },
);

export const WebhookEndpointPage = documented(
  z.strictObject({
    webhook_endpoints: documented(z.array(WebhookEndpoint), { maxItems: PAGE.max }),
    next_cursor: z.string().nullable(),
  }),
  { id: 'WebhookEndpointPage' },
);

export const WebhookAttempt = documented(
  z.strictObject({
    at: dateTime(),
    duration_ms: documented(z.number().int(), { format: 'int32', minimum: 0, maximum: 600_000 }),
    status_code: documented(z.number().int().nullable(), { format: 'int32', minimum: 100, maximum: 599 }),
    error: documented(z.string().nullable(), {
      description: 'Why there was no 2xx answer: HTTP <status>, a network error code, the timeout, a refused address.',
      maxLength: 500,
    }),
  }),
  { id: 'WebhookAttempt' },
);

export const WebhookDelivery = documented(
  z.strictObject({
    id: documented(z.string(), { pattern: MESSAGE_ID, description: 'The webhook-id: the same on every attempt.' }),
    type: documented(z.string(), { enum: [...WEBHOOK_EVENT_TYPES, 'ping'] }),
    status: documented(z.enum(['pending', 'delivered', 'failed', 'cancelled']), {
      description: 'cancelled: not sent, because its owner was deactivated at the directory.',
    }),
    created_at: dateTime(),
    next_attempt_at: documented(z.string().nullable(), { format: 'date-time' }),
    attempts: documented(z.array(WebhookAttempt), {
      maxItems: WEBHOOK_LIMITS.maxListedAttempts,
      description: `The newest ${WEBHOOK_LIMITS.maxListedAttempts} attempts, oldest first.`,
    }),
  }),
  { id: 'WebhookDelivery' },
);

export const WebhookDeliveryPage = documented(
  z.strictObject({
    deliveries: documented(z.array(WebhookDelivery), { maxItems: PAGE.max }),
    next_cursor: z.string().nullable(),
  }),
  { id: 'WebhookDeliveryPage' },
);

export type OrderRepresentation = z.infer<typeof Order>;
export type WebhookEndpointRepresentation = z.infer<typeof WebhookEndpoint>;
export type WebhookDeliveryRepresentation = z.infer<typeof WebhookDelivery>;
export type OrderPageRepresentation = z.infer<typeof OrderPage>;
