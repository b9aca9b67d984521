import type { z } from 'zod';
import { invalidInput, type InvalidField } from '../../domain/errors.js';
import type { OrderLineInput } from '../../domain/model.js';
import type {
  NewWebhookEndpoint as NewEndpointInput,
  WebhookEndpointPatch as EndpointPatchInput,
} from '../../domain/webhookService.js';
import { NewOrder, NewWebhookEndpoint, OrderItemsReplacement, OrderPatch, WebhookEndpointPatch } from './contract.js';

const pointer = (path: readonly PropertyKey[]) =>
  '/' + path.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

/** Members of an order that the server owns; a client may read them but not write them. */
const READ_ONLY = new Set([
  'id',
  'customer_id',
  'total_cents',
  'created_at',
  'updated_at',
  'status',
  'items',
  'secret',
  'disabled_reason',
]);

/** Validates a body against a schema; every problem becomes one entry with a JSON pointer. */
function parseBody<T>(schema: z.ZodType<T>, body: unknown, writable: readonly string[]): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidInput([{ pointer: '', reason: 'must be a JSON object' }]);
  }
  const invalid: InvalidField[] = [];
  for (const member of Object.keys(body)) {
    if (writable.includes(member)) continue;
    invalid.push({
      pointer: pointer([member]),
      reason: READ_ONLY.has(member) ? 'is read-only here' : 'is not a member of this resource',
    });
  }
  const result = schema.safeParse(body);
  if (!result.success) {
    for (const issue of result.error.issues) {
      if (issue.code === 'unrecognized_keys' && issue.path.length === 0) continue; // reported above
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys)
          invalid.push({ pointer: pointer([...issue.path, key]), reason: 'is not a member of this resource' });
      } else {
        invalid.push({ pointer: pointer(issue.path), reason: issue.message });
      }
    }
  }
  if (invalid.length || !result.success) throw invalidInput(invalid);
  return result.data;
}

export function parseCreateBody(body: unknown): { customerId: string | null | undefined; items: OrderLineInput[] } {
  const parsed = parseBody(NewOrder, body, ['customer_id', 'items']);
  return { customerId: parsed.customer_id, items: parsed.items };
}

/** PUT replaces what a client may change wholesale: the lines of a pending order. */
export function parseReplaceBody(body: unknown): OrderLineInput[] {
  return parseBody(OrderItemsReplacement, body, ['items']).items;
}

/** A JSON merge patch (RFC 7396) of an order: only `status` may change, and it cannot be removed. */
export function parseOrderPatch(body: unknown): { status?: string } {
  return parseBody(OrderPatch, body, ['status']);
}

/** A new webhook endpoint: the structure here, the values (URL, where it resolves, event types) in the domain. */
export function parseWebhookEndpointBody(body: unknown): NewEndpointInput {
  return parseBody(NewWebhookEndpoint, body, ['url', 'events', 'description']);
}

/** A JSON merge patch of a webhook endpoint; `description: null` removes it. */
export function parseWebhookEndpointPatch(body: unknown): EndpointPatchInput {
  return parseBody(WebhookEndpointPatch, body, ['url', 'events', 'description', 'enabled']);
}
