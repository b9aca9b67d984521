import type { OrderEvent } from './model.js';
import { SCOPES, STAFF_ROLE, type User } from './policy.js';
import { audienceOf } from './subscriptions.js';
import { webhookTypesOf, type WebhookEndpoint, type WebhookEventType, type WebhookOwner } from './webhooks.js';

/** One message the outbox's events make for an endpoint. */
export interface PlannedMessage {
  readonly endpoint: WebhookEndpoint;
  readonly event: OrderEvent;
  readonly type: WebhookEventType;
}

/** The owner as a principal that may read orders, the way their credential made them when they created it. */
function ownerAsUser(owner: WebhookOwner): User {
  return {
    kind: 'user',
    subject: owner.subject,
    scopes: new Set([SCOPES.read]),
    roles: new Set(owner.staff ? [STAFF_ROLE] : []),
    ...(owner.directoryKey !== null ? { directoryKey: owner.directoryKey } : {}),
  };
}

/**
 * Who receives what: the delivery side's questions about endpoints' owners, answered with the subscriptions' rule
 * and the directory's word on each owner now.
 */
export function createWebhookAudience(directory: { admit(user: User): User | null }) {
  return {
    /**
     * The messages order events make: for each endpoint that asked for the event's type, if its owner may read the
     * order now (the subscriptions' rule, with the directory's word on the owner: a deactivated owner gets nothing).
     */
    plan(events: readonly OrderEvent[], endpoints: readonly WebhookEndpoint[]): PlannedMessage[] {
      const audiences = endpoints.flatMap((endpoint) => {
        const owner = directory.admit(ownerAsUser(endpoint.owner));
        return owner ? [{ endpoint, audience: audienceOf(owner, endpoint.owner.customerId) }] : [];
      });
      const planned: PlannedMessage[] = [];
      for (const event of events) {
        for (const type of webhookTypesOf(event)) {
          for (const { endpoint, audience } of audiences) {
            if (endpoint.events.includes(type) && audience.sees(event)) planned.push({ endpoint, event, type });
          }
        }
      }
      return planned;
    },

    /** Whether an endpoint's owner may still be sent anything now (the directory has not deactivated them). */
    ownerActive(owner: WebhookOwner): boolean {
      return directory.admit(ownerAsUser(owner)) !== null;
    },
  };
}
