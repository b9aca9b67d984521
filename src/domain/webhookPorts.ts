import type { OrderEvent } from './model.js';
import type { WebhookCursor, WebhookDelivery, WebhookEndpoint, WebhookEventType, WebhookOwner } from './webhooks.js';

/** What the domain needs from storage for webhooks (ports.ts re-exports these), implemented in src/store/. */

/** A change to an endpoint's own settings (merge patch semantics: only what is given changes). */
export interface WebhookEndpointChange {
  readonly url?: string;
  readonly events?: readonly WebhookEventType[];
  readonly description?: string | null;
  readonly enabled?: boolean;
}

/** A message to queue for an endpoint: the exact body to sign and send, and the trace of what caused it. */
export interface NewWebhookMessage {
  readonly id: string;
  readonly endpointId: string;
  readonly eventId: string | null;
  readonly type: string;
  readonly body: string;
  readonly trace?: { readonly traceparent: string; readonly tracestate?: string };
  readonly maxAttempts: number;
  /** The customer whose order the message is about (null for a ping): who may still be sent it. */
  readonly orderCustomerId: string | null;
}

/** Webhook endpoints and their deliveries, within one owner (or every owner's, `ownerSubject` null: staff). */
export interface WebhookRepository {
  /**
   * Takes the owner's turn for the rest of the transaction (concurrent creates of one owner go one at a time, so
   * the limit per owner holds) and counts the owner's endpoints.
   */
  lockOwner(subject: string): Promise<number>;
  insertEndpoint(endpoint: WebhookEndpoint, secret: string): Promise<void>;
  findEndpoint(ownerSubject: string | null, id: string): Promise<WebhookEndpoint | null>;
  /** Newest first. */
  listEndpoints(
    ownerSubject: string | null,
    opts: { readonly limit: number; readonly after?: WebhookCursor },
  ): Promise<WebhookEndpoint[]>;
  /** Compare-and-set on the version: null when the endpoint is gone or has moved on. */
  updateEndpoint(id: string, expectedVersion: number, change: WebhookEndpointChange): Promise<WebhookEndpoint | null>;
  deleteEndpoint(id: string, expectedVersion: number): Promise<boolean>;
  /** A new secret; the current one stays valid until `previousUntil`. Compare-and-set on the version. */
  rotateSecret(
    id: string,
    expectedVersion: number,
    secret: string,
    previousUntil: Date,
  ): Promise<WebhookEndpoint | null>;
  /** The endpoint's messages, newest first, each with its newest attempts. */
  deliveries(
    endpointId: string,
    opts: { readonly limit: number; readonly after?: WebhookCursor; readonly attempts: number },
  ): Promise<WebhookDelivery[]>;
  findDelivery(endpointId: string, id: string, attempts: number): Promise<WebhookDelivery | null>;
  /** Sends the message once more, now: one attempt beyond those it has had. */
  retryDelivery(endpointId: string, id: string): Promise<boolean>;
  /** Whose order a message is about: a customer id, null for a ping, undefined when there is no such message. */
  messageAbout(endpointId: string, id: string): Promise<string | null | undefined>;
  /**
   * The roles an owner's newest credential showed (`staff`, as of `at`, its issue time) on all their endpoints,
   * unless an endpoint already has those of a newer credential.
   */
  noteOwnerRoles(subject: string, staff: boolean, at: Date): Promise<void>;
  insertMessages(messages: readonly NewWebhookMessage[]): Promise<void>;
  /** Every enabled endpoint, for deriving messages from events. */
  enabledEndpoints(): Promise<WebhookEndpoint[]>;
  /**
   * Outbox events after `afterId`, oldest first, including those past the subscribers' retention window; `lastId` is
   * the last id read (null when none), `skipped` the ids of rows that could not be read as events.
   */
  eventsAfter(
    afterId: string,
    limit: number,
  ): Promise<{ events: OrderEvent[]; lastId: string | null; skipped: readonly string[] }>;
  /** Takes the outbox cursor for this transaction (replicas take turns) and returns the last event id turned into messages. */
  lockOutboxCursor(): Promise<string>;
  advanceOutboxCursor(lastEventId: string): Promise<void>;
}

/** A message a replica has claimed, with what sending it needs. */
export interface ClaimedWebhookMessage {
  readonly id: string;
  readonly endpointId: string;
  readonly type: string;
  readonly body: string;
  readonly trace?: { readonly traceparent: string; readonly tracestate?: string };
  /** Attempts made before this one. */
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly url: string;
  /** The current secret first, then the previous one while it is still valid. */
  readonly secrets: readonly string[];
  readonly owner: WebhookOwner;
  /** The customer whose order it is about (null for a ping). */
  readonly orderCustomerId: string | null;
}

/** How one attempt went, and what becomes of the message. */
export interface WebhookAttemptRecord {
  readonly at: Date;
  readonly durationMs: number;
  readonly statusCode: number | null;
  readonly error: string | null;
  /** pending (with `nextAttemptAt`), delivered, failed (no attempts left) or cancelled (not sent at all). */
  readonly status: 'pending' | 'delivered' | 'failed' | 'cancelled';
  readonly nextAttemptAt: Date | null;
  /** A failed attempt counts towards disabling the endpoint; a success clears its failing streak. */
  readonly counts: 'success' | 'failure' | 'neither';
}

/** The delivery queue: claiming due messages for one replica at a time, and recording their attempts. */
export interface WebhookQueue {
  /**
   * Claims up to `limit` due messages of enabled endpoints for `leaseMs` (skipping rows another replica holds), so
   * that no endpoint has more than `perEndpoint` in flight here, and no owner (subject) more than `perOwner`,
   * counting those already in flight (`inFlight` by endpoint id, `ownersInFlight` by owner subject).
   */
  claim(opts: {
    readonly limit: number;
    readonly perEndpoint: number;
    readonly perOwner: number;
    readonly inFlight: ReadonlyMap<string, number>;
    readonly ownersInFlight: ReadonlyMap<string, number>;
    readonly leaseMs: number;
    readonly token: string;
  }): Promise<ClaimedWebhookMessage[]>;
  /**
   * Records an attempt and its outcome, if the claim is still this replica's (`token`); an endpoint failing since
   * more than `disableAfterMs` is disabled. False when the claim had been lost.
   */
  record(id: string, token: string, attempt: WebhookAttemptRecord, disableAfterMs: number): Promise<boolean>;
  /** Seconds the oldest due message has waited (0 when none is due). */
  backlogSeconds(): Promise<number>;
}
