import { LRUCache } from 'lru-cache';
import type { OrderEvent } from './model.js';
import type { Storage } from './ports.js';
import { isStaff, SCOPES, STAFF_ROLE, type User } from './policy.js';
import { audienceOf } from './subscriptions.js';
import {
  WEBHOOK_LIMITS,
  webhookTypesOf,
  type WebhookEndpoint,
  type WebhookEventType,
  type WebhookOwner,
} from './webhooks.js';

/** One message the outbox's events make for an endpoint. */
export interface PlannedMessage {
  readonly endpoint: WebhookEndpoint;
  readonly event: OrderEvent;
  readonly type: WebhookEventType;
}

const ROLES_MAX_AGE_MS = WEBHOOK_LIMITS.ownerRolesMaxAgeHours * 3_600_000;
/** Owners whose newest credential this replica has noted (subject → its issue time and staff role). */
const NOTED_OWNERS = 10_000;

/**
 * The owner as a principal that may read orders, with the staff role their newest credential seen showed, while it
 * is recent enough; the directory then has its say (deactivation, and the staff role when it manages it).
 */
function ownerAsUser(owner: WebhookOwner, now: number): User {
  const staff = owner.staff && now - owner.rolesAt <= ROLES_MAX_AGE_MS;
  return {
    kind: 'user',
    subject: owner.subject,
    scopes: new Set([SCOPES.read]),
    roles: new Set(staff ? [STAFF_ROLE] : []),
    ...(owner.directoryKey !== null ? { directoryKey: owner.directoryKey } : {}),
  };
}

/**
 * Who receives what: the delivery side's questions about endpoints' owners, answered with the subscriptions' rule
 * and the owner's privileges now — the directory's word where it decides, else the newest credential's roles.
 */
export function createWebhookAudience(deps: { storage: Storage; directory: { admit(user: User): User | null } }) {
  const { directory } = deps;
  const noted = new LRUCache<string, { at: number; staff: boolean }>({ max: NOTED_OWNERS });
  return {
    /**
     * The messages order events make: for each endpoint that asked for the event's type, if its owner may read the
     * order now (the subscriptions' rule, with the owner's privileges now: a deactivated owner gets nothing).
     */
    plan(events: readonly OrderEvent[], endpoints: readonly WebhookEndpoint[]): PlannedMessage[] {
      const now = Date.now();
      const audiences = endpoints.flatMap((endpoint) => {
        const owner = directory.admit(ownerAsUser(endpoint.owner, now));
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

    /**
     * Why a message may not be sent to its endpoint now, or null: its owner was deactivated, or may no longer read
     * the order it is about (`orderCustomerId`; null for a ping). Asked at every attempt, retries included.
     */
    refusal(owner: WebhookOwner, orderCustomerId: string | null): string | null {
      const user = directory.admit(ownerAsUser(owner, Date.now()));
      if (!user) return 'owner deactivated';
      if (orderCustomerId === null || isStaff(user) || orderCustomerId === owner.customerId) return null;
      return 'owner may no longer read this order';
    },

    /**
     * Takes note of the roles a verified credential carries (before the directory's say), for its subject's
     * endpoints: once per newer credential on each replica, so a repeated token costs nothing.
     */
    async ownerSeen(user: User): Promise<void> {
      const at = user.issuedAt ?? Date.now();
      const staff = isStaff(user);
      const last = noted.get(user.subject);
      if (last && (last.at >= at || (user.issuedAt === undefined && last.staff === staff))) return;
      noted.set(user.subject, { at, staff });
      try {
        await deps.storage.webhooks.noteOwnerRoles(user.subject, staff, new Date(at));
      } catch (error) {
        noted.delete(user.subject);
        throw error;
      }
    },
  };
}
