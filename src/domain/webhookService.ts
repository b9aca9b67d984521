import { randomBytes } from 'node:crypto';
import type { CustomerService } from './customers.js';
import { DomainError, invalidInput, notFound, type InvalidField } from './errors.js';
import { entityTag, tagMatches, type Precondition } from './etags.js';
import { newId, WEBHOOK_ENDPOINT_ID, WEBHOOK_MESSAGE_ID } from './ids.js';
import type { Storage, WebhookEndpointChange } from './ports.js';
import { isStaff, requireScope, requireStepUp, SCOPES, type Principal, type StepUpRule, type User } from './policy.js';
import { createWebhookAudience } from './webhookAudience.js';
import {
  descriptionProblems,
  eventsProblems,
  PING,
  urlProblems,
  WEBHOOK_LIMITS,
  type WebhookCursor,
  type WebhookDelivery,
  type WebhookEndpoint,
} from './webhooks.js';

/** Where a receiver's host resolves to is checked by the delivery side (it needs DNS): a reason to refuse, or null. */
export interface WebhookTargetCheck {
  refusal(url: URL): Promise<string | null>;
}

export interface NewWebhookEndpoint {
  readonly url?: unknown;
  readonly events?: unknown;
  readonly description?: unknown;
}

/** A JSON merge patch of an endpoint: what is given changes; `description: null` removes it. */
export interface WebhookEndpointPatch {
  readonly url?: unknown;
  readonly events?: unknown;
  readonly description?: unknown;
  readonly enabled?: unknown;
}

export interface WebhookPage<T> {
  readonly items: T[];
  readonly hasMore: boolean;
  readonly limit: number;
}

/** The endpoint and its secret: the secret is shown only when it is made (creation, rotation). */
export interface EndpointWithSecret {
  readonly endpoint: WebhookEndpoint;
  readonly secret: string;
}

const PAGE = { default: 20, max: 100 } as const;
const MAX_WRITE_ATTEMPTS = 3;

/** A Standard Webhooks secret: `whsec_` and 32 random bytes in base64. */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function pageSize(first: number | null | undefined): number {
  if (first === null || first === undefined) return PAGE.default;
  if (!Number.isInteger(first) || first < 0) {
    throw invalidInput([{ pointer: '/first', reason: 'must be a non-negative integer' }]);
  }
  return Math.min(first, PAGE.max);
}

const changed = () =>
  new DomainError('PRECONDITION_FAILED', 'The webhook endpoint has changed since the version you sent; read it again.');

export function createWebhookService(deps: {
  storage: Storage;
  customers: CustomerService;
  /** The directory's verdict on a person now: null when deactivated, else with the staff role it decides. */
  directory: { admit(user: User): User | null };
  stepUp: StepUpRule | null;
  targets: WebhookTargetCheck;
  /** Production without WEBHOOK_ALLOW_PRIVATE_URLS: receivers must be https. */
  requireHttps: boolean;
  /** Attempts a message gets: the length of the retry schedule. */
  maxAttempts: number;
  /** Told when a message was queued outside the outbox (a ping, a retry), so a worker picks it up now. */
  onQueued: () => void;
}) {
  const { storage, stepUp } = deps;

  /** Endpoints are managed by their owner; staff writes (their own endpoints' or not) need the step-up. */
  function writer(principal: Principal): User {
    const user = requireScope(principal, SCOPES.read);
    if (isStaff(user)) requireStepUp(user, stepUp);
    return user;
  }

  /** The caller's endpoint, or for staff anyone's (as staff read every order); someone else's is a customer's 404. */
  async function visible(user: User, id: string): Promise<WebhookEndpoint | null> {
    if (!WEBHOOK_ENDPOINT_ID.test(id)) return null;
    return storage.webhooks.findEndpoint(isStaff(user) ? null : user.subject, id);
  }

  /** An endpoint the caller may manage: their own. Staff see others' and may only disable or enable them. */
  async function owned(user: User, id: string, staffMay: 'read' | 'enable' = 'read'): Promise<WebhookEndpoint> {
    const endpoint = await visible(user, id);
    if (!endpoint) throw notFound('Webhook endpoint');
    if (endpoint.owner.subject !== user.subject && staffMay !== 'enable') {
      throw new DomainError('FORBIDDEN', "Staff may disable or enable someone else's webhook endpoint, nothing more.");
    }
    return endpoint;
  }

  async function checkUrl(value: unknown, pointer: string): Promise<InvalidField[]> {
    if (typeof value !== 'string') return [{ pointer, reason: 'must be a URL string' }];
    const shape = urlProblems(value, pointer, deps.requireHttps);
    if (shape.length) return shape;
    const refusal = await deps.targets.refusal(new URL(value));
    return refusal ? [{ pointer, reason: refusal }] : [];
  }

  /** Runs a compare-and-set write on the caller's endpoint, re-reading on a lost race, under the precondition. */
  async function writeOwned<T>(
    user: User,
    id: string,
    precondition: Precondition | undefined,
    attempt: (endpoint: WebhookEndpoint) => Promise<T | null>,
    staffMay: 'read' | 'enable' = 'read',
  ): Promise<T> {
    for (let n = 1; ; n++) {
      const endpoint = await owned(user, id, staffMay);
      if (!tagMatches(precondition, entityTag(endpoint))) throw changed();
      const result = await attempt(endpoint);
      if (result !== null) return result;
      if (n >= MAX_WRITE_ATTEMPTS) throw changed();
    }
  }

  async function deliveryOf(endpointId: string, id: string): Promise<WebhookDelivery> {
    const delivery = await storage.webhooks.findDelivery(endpointId, id, WEBHOOK_LIMITS.maxListedAttempts);
    if (!delivery) throw notFound('Delivery');
    return delivery;
  }

  return {
    /** Registers an endpoint for the caller: they own it, and it receives what they may read. */
    async create(principal: Principal, input: NewWebhookEndpoint): Promise<EndpointWithSecret> {
      const user = writer(principal);
      const { invalid: eventProblems, events } = eventsProblems(input.events, '/events');
      const invalid = [
        ...(await checkUrl(input.url, '/url')),
        ...eventProblems,
        ...descriptionProblems(input.description, '/description'),
      ];
      if (invalid.length) throw invalidInput(invalid);
      const now = new Date().toISOString();
      const endpoint: WebhookEndpoint = {
        id: newId('we'),
        owner: {
          subject: user.subject,
          customerId: await deps.customers.idFor(user),
          // The credential's own role: what decides whenever the directory does not.
          staff: user.staffByToken ?? isStaff(user),
          rolesAt: user.issuedAt ?? Date.now(),
          directoryKey: user.directoryKey ?? null,
        },
        url: input.url as string,
        events,
        description: (input.description as string | null | undefined) ?? null,
        enabled: true,
        disabledReason: null,
        version: 1,
        createdAt: now,
        updatedAt: now,
      };
      const secret = newSecret();
      await storage.transaction(async (tx) => {
        if ((await tx.webhooks.lockOwner(user.subject)) >= WEBHOOK_LIMITS.maxEndpointsPerOwner) {
          throw invalidInput([
            {
              pointer: '',
              reason: `at most ${WEBHOOK_LIMITS.maxEndpointsPerOwner} webhook endpoints per owner; delete one first`,
            },
          ]);
        }
        await tx.webhooks.insertEndpoint(endpoint, secret);
      });
      return { endpoint, secret };
    },

    async list(
      principal: Principal,
      opts: { readonly first?: number | null; readonly after?: WebhookCursor } = {},
    ): Promise<WebhookPage<WebhookEndpoint>> {
      const user = requireScope(principal, SCOPES.read);
      const limit = pageSize(opts.first);
      if (limit === 0) return { items: [], hasMore: false, limit };
      const rows = await storage.webhooks.listEndpoints(isStaff(user) ? null : user.subject, {
        limit: limit + 1,
        ...(opts.after ? { after: opts.after } : {}),
      });
      return { items: rows.slice(0, limit), hasMore: rows.length > limit, limit };
    },

    /** The caller's endpoint (staff: anyone's), or null (someone else's is reported exactly like a missing one). */
    async get(principal: Principal, id: string): Promise<WebhookEndpoint | null> {
      return visible(requireScope(principal, SCOPES.read), id);
    },

    /** Applies a merge patch under a precondition; enabling again clears what disabled it. */
    async patch(
      principal: Principal,
      id: string,
      patch: WebhookEndpointPatch,
      precondition?: Precondition,
    ): Promise<WebhookEndpoint> {
      const user = writer(principal);
      const invalid: InvalidField[] = [];
      const change: { -readonly [K in keyof WebhookEndpointChange]: WebhookEndpointChange[K] } = {};
      if (patch.url !== undefined) {
        invalid.push(...(await checkUrl(patch.url, '/url')));
        if (typeof patch.url === 'string') change.url = patch.url;
      }
      if (patch.events !== undefined) {
        const checked = eventsProblems(patch.events, '/events');
        invalid.push(...checked.invalid);
        change.events = checked.events;
      }
      if (patch.description !== undefined) {
        invalid.push(...descriptionProblems(patch.description, '/description'));
        change.description = patch.description as string | null;
      }
      if (patch.enabled !== undefined) {
        if (typeof patch.enabled !== 'boolean') invalid.push({ pointer: '/enabled', reason: 'must be true or false' });
        else change.enabled = patch.enabled;
      }
      if (invalid.length) throw invalidInput(invalid);
      const onlyEnabled = Object.keys(change).every((key) => key === 'enabled');
      return writeOwned(
        user,
        id,
        precondition,
        (endpoint) =>
          Object.keys(change).length
            ? storage.webhooks.updateEndpoint(endpoint.id, endpoint.version, change)
            : Promise.resolve(endpoint),
        onlyEnabled ? 'enable' : 'read',
      );
    },

    async remove(principal: Principal, id: string, precondition?: Precondition): Promise<void> {
      const user = writer(principal);
      await writeOwned(user, id, precondition, async (endpoint) =>
        (await storage.webhooks.deleteEndpoint(endpoint.id, endpoint.version)) ? true : null,
      );
    },

    /** A new secret; the old one stays valid for 24 hours, and both sign every message meanwhile. */
    async rotateSecret(principal: Principal, id: string, precondition?: Precondition): Promise<EndpointWithSecret> {
      const user = writer(principal);
      const secret = newSecret();
      const previousUntil = new Date(Date.now() + WEBHOOK_LIMITS.previousSecretHours * 3_600_000);
      const endpoint = await writeOwned(user, id, precondition, (current) =>
        storage.webhooks.rotateSecret(current.id, current.version, secret, previousUntil),
      );
      return { endpoint, secret };
    },

    /** The endpoint's messages, newest first, each with its attempts. */
    async deliveries(
      principal: Principal,
      id: string,
      opts: { readonly first?: number | null; readonly after?: WebhookCursor } = {},
    ): Promise<WebhookPage<WebhookDelivery>> {
      const user = requireScope(principal, SCOPES.read);
      const endpoint = await owned(user, id, 'enable');
      const limit = pageSize(opts.first);
      if (limit === 0) return { items: [], hasMore: false, limit };
      const rows = await storage.webhooks.deliveries(endpoint.id, {
        limit: limit + 1,
        attempts: WEBHOOK_LIMITS.maxListedAttempts,
        ...(opts.after ? { after: opts.after } : {}),
      });
      return { items: rows.slice(0, limit), hasMore: rows.length > limit, limit };
    },

    /** Sends a message once more, now, whatever became of it: one attempt beyond those it had. */
    async retry(principal: Principal, id: string, deliveryId: string): Promise<WebhookDelivery> {
      const user = writer(principal);
      const endpoint = await owned(user, id);
      const about = WEBHOOK_MESSAGE_ID.test(deliveryId)
        ? await storage.webhooks.messageAbout(endpoint.id, deliveryId)
        : undefined;
      if (about === undefined) throw notFound('Delivery');
      // The owner's privileges now, not when the message was made: a demoted owner re-sends no one else's order.
      if (about !== null && !isStaff(user) && about !== endpoint.owner.customerId) {
        throw new DomainError('FORBIDDEN', 'This message is about an order you may no longer read; it is not sent.');
      }
      if (!(await storage.webhooks.retryDelivery(endpoint.id, deliveryId))) throw notFound('Delivery');
      deps.onQueued();
      return deliveryOf(endpoint.id, deliveryId);
    },

    /** Queues a `ping` message to the endpoint: one attempt, shown in its deliveries. */
    async ping(principal: Principal, id: string): Promise<WebhookDelivery> {
      const user = writer(principal);
      const endpoint = await owned(user, id);
      const messageId = newId('msg');
      const body = JSON.stringify({
        type: PING,
        timestamp: new Date().toISOString(),
        data: { endpoint_id: endpoint.id },
      });
      await storage.webhooks.insertMessages([
        {
          id: messageId,
          endpointId: endpoint.id,
          eventId: null,
          type: PING,
          body,
          maxAttempts: 1,
          orderCustomerId: null,
        },
      ]);
      deps.onQueued();
      return deliveryOf(endpoint.id, messageId);
    },

    ...createWebhookAudience({ storage, directory: deps.directory }),

    maxAttempts: deps.maxAttempts,
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
