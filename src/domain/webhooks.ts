import type { InvalidField } from './errors.js';
import type { OrderEvent } from './model.js';

/** The event types an endpoint can ask for. A cancellation is a status change too: it sends both types. */
export const WEBHOOK_EVENT_TYPES = ['order.created', 'order.status_changed', 'order.cancelled'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
/** What a ping sends: not an event anyone subscribes to. */
export const PING = 'ping';

export const WEBHOOK_LIMITS = {
  /** Endpoints one owner may have. */
  maxEndpointsPerOwner: 20,
  maxUrlLength: 2048,
  maxDescriptionLength: 500,
  /** A rotated secret stays valid this long beside the new one: both signatures are sent. */
  previousSecretHours: 24,
  /** Attempts listed with each delivery (the newest). */
  maxListedAttempts: 50,
  /**
   * Without a directory deciding the staff role, the staff role an owner's newest credential showed counts this long
   * after that credential was issued: an owner who is never seen again stops receiving other customers' orders.
   */
  ownerRolesMaxAgeHours: 24,
} as const;

/** Whom an endpoint belongs to, as the visibility rule and the directory need it. */
export interface WebhookOwner {
  readonly subject: string;
  readonly customerId: string;
  /** Whether the owner's newest credential seen carried the staff role, and when it was issued (ms since the epoch). */
  readonly staff: boolean;
  readonly rolesAt: number;
  /** The directory key of the owner's credential when it had one: a deactivated owner's endpoints receive nothing. */
  readonly directoryKey: string | null;
}

export interface WebhookEndpoint {
  readonly id: string;
  readonly owner: WebhookOwner;
  readonly url: string;
  readonly events: readonly WebhookEventType[];
  readonly description: string | null;
  readonly enabled: boolean;
  /** Why the endpoint was disabled, when the service did it (it failed continuously for too long). */
  readonly disabledReason: string | null;
  readonly version: number;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled';

export interface WebhookAttempt {
  readonly at: string;
  readonly durationMs: number;
  /** The HTTP status the receiver answered, or null when there was no answer. */
  readonly statusCode: number | null;
  /** Why there was no 2xx answer in time: a network error, the timeout, a refused address. */
  readonly error: string | null;
}

/** One message to one endpoint (its id is the `webhook-id`), with its attempts so far. */
export interface WebhookDelivery {
  readonly id: string;
  readonly endpointId: string;
  readonly type: string;
  readonly status: DeliveryStatus;
  readonly createdAt: string;
  /** When the next attempt is due, while pending. */
  readonly nextAttemptAt: string | null;
  readonly attempts: readonly WebhookAttempt[];
}

/** Position in the newest-first order of endpoints or deliveries: (createdAt, id) descending. */
export interface WebhookCursor {
  readonly createdAt: string;
  readonly id: string;
}

/**
 * The webhook event types an order event is: `created` is order.created; an `updated` that left the order pending
 * replaced its lines (no transition leads to pending), any other is a status change, and a cancellation is also
 * order.cancelled. A deletion sends nothing.
 */
export function webhookTypesOf(event: OrderEvent): WebhookEventType[] {
  if (event.kind === 'created') return ['order.created'];
  if (event.kind !== 'updated' || event.order.status === 'pending') return [];
  return event.order.status === 'cancelled' ? ['order.status_changed', 'order.cancelled'] : ['order.status_changed'];
}

/** An endpoint's `events`: a non-empty list of known types (one pointer per unknown one), in the catalogue's order. */
export function eventsProblems(
  value: unknown,
  pointer: string,
): { invalid: InvalidField[]; events: WebhookEventType[] } {
  if (!Array.isArray(value) || value.length === 0) {
    return {
      invalid: [{ pointer, reason: `must be a non-empty list of ${WEBHOOK_EVENT_TYPES.join(', ')}` }],
      events: [],
    };
  }
  const invalid: InvalidField[] = [];
  value.forEach((type, i) => {
    if (!isWebhookEventType(type)) {
      invalid.push({
        pointer: `${pointer}/${i}`,
        reason: `unknown event type; one of ${WEBHOOK_EVENT_TYPES.join(', ')}`,
      });
    }
  });
  return { invalid, events: WEBHOOK_EVENT_TYPES.filter((t) => value.includes(t)) };
}

export function descriptionProblems(value: unknown, pointer: string): InvalidField[] {
  if (value === null || value === undefined) return [];
  if (typeof value !== 'string') return [{ pointer, reason: 'must be a string or null' }];
  return value.length > WEBHOOK_LIMITS.maxDescriptionLength
    ? [{ pointer, reason: `must be at most ${WEBHOOK_LIMITS.maxDescriptionLength} characters` }]
    : [];
}

export function isWebhookEventType(value: unknown): value is WebhookEventType {
  return typeof value === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);
}

/**
 * The shape of a receiver's URL: absolute http(s), no credentials in it, no fragment, of bounded length; https only
 * when `requireHttps`. Where its host resolves to is checked apart (the address rule needs DNS).
 */
export function urlProblems(value: string, pointer: string, requireHttps: boolean): InvalidField[] {
  if (value.length > WEBHOOK_LIMITS.maxUrlLength) {
    return [{ pointer, reason: `must be at most ${WEBHOOK_LIMITS.maxUrlLength} characters` }];
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return [{ pointer, reason: 'must be an absolute http or https URL' }];
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return [{ pointer, reason: 'must be an http or https URL' }];
  }
  if (requireHttps && url.protocol !== 'https:') return [{ pointer, reason: 'must be an https URL' }];
  if (url.username || url.password) return [{ pointer, reason: 'must not carry a user name or password' }];
  if (url.hash) return [{ pointer, reason: 'must not have a fragment' }];
  if (!url.hostname) return [{ pointer, reason: 'must name a host' }];
  return [];
}

/**
 * The retry schedule: the delay before each attempt, in seconds (the first is usually 0). A delay is stretched by up
 * to `jitter` of itself, never shortened, so that receivers coming back are not hit by every retry at once.
 */
export function nextDelayMs(scheduleSeconds: readonly number[], attemptsMade: number, random = Math.random): number {
  const base = (scheduleSeconds[attemptsMade] ?? 0) * 1000;
  return Math.round(base * (1 + JITTER * random()));
}

export const JITTER = 0.1;
