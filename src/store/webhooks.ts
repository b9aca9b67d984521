import { z } from 'zod';
import type { NewWebhookMessage, WebhookEndpointChange, WebhookRepository } from '../domain/ports.js';
import {
  WEBHOOK_EVENT_TYPES,
  type WebhookAttempt,
  type WebhookDelivery,
  type WebhookEndpoint,
} from '../domain/webhooks.js';
import type { Queryable } from './db.js';
import { allEventsAfter } from './events.js';

const int = z.coerce.number().int();
const timestamp = z.string();

const EndpointRow = z.object({
  id: z.string(),
  owner_subject: z.string(),
  owner_customer_id: z.string(),
  owner_staff: z.boolean(),
  owner_directory_key: z.string().nullable(),
  owner_roles_at: timestamp,
  url: z.string(),
  events: z.preprocess(
    (v) => (typeof v === 'string' ? (JSON.parse(v) as unknown) : v),
    z.array(z.enum(WEBHOOK_EVENT_TYPES)),
  ),
  description: z.string().nullable(),
  enabled: z.boolean(),
  disabled_reason: z.string().nullable(),
  version: int,
  created_at: timestamp,
  updated_at: timestamp,
});

export const ENDPOINT_COLUMNS =
  'id, owner_subject, owner_customer_id, owner_staff, owner_directory_key, owner_roles_at, url, events, description, ' +
  'enabled, ' +
  'disabled_reason, version, created_at, updated_at';

export function toEndpoint(row: unknown): WebhookEndpoint {
  const r = EndpointRow.parse(row);
  return {
    id: r.id,
    owner: {
      subject: r.owner_subject,
      customerId: r.owner_customer_id,
      staff: r.owner_staff,
      rolesAt: Date.parse(r.owner_roles_at),
      directoryKey: r.owner_directory_key,
    },
    url: r.url,
    events: r.events,
    description: r.description,
    enabled: r.enabled,
    disabledReason: r.disabled_reason,
    version: r.version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

const DeliveryRow = z.object({
  id: z.string(),
  endpoint_id: z.string(),
  type: z.string(),
  status: z.enum(['pending', 'delivered', 'failed', 'cancelled']),
  created_at: timestamp,
  next_attempt_at: timestamp,
  attempts: z.preprocess(
    (v) => (typeof v === 'string' ? (JSON.parse(v) as unknown) : v),
    z.array(
      z.object({
        at: z.coerce.date(),
        duration_ms: int,
        status_code: int.nullable(),
        error: z.string().nullable(),
      }),
    ),
  ),
});

function toDelivery(row: unknown): WebhookDelivery {
  const r = DeliveryRow.parse(row);
  const attempts: WebhookAttempt[] = r.attempts.map((a) => ({
    at: a.at.toISOString(),
    durationMs: a.duration_ms,
    statusCode: a.status_code,
    error: a.error,
  }));
  return {
    id: r.id,
    endpointId: r.endpoint_id,
    type: r.type,
    status: r.status,
    createdAt: r.created_at,
    nextAttemptAt: r.status === 'pending' ? r.next_attempt_at : null,
    attempts,
  };
}

/** The newest `$n` attempts of each message, oldest first, as JSON. */
const ATTEMPTS_OF = (limitParam: string) =>
  `coalesce((select jsonb_agg(jsonb_build_object('at', a.attempted_at, 'duration_ms', a.duration_ms,
       'status_code', a.status_code, 'error', a.error) order by a.id)
     from (select * from webhook_attempts where message_id = m.id order by id desc limit ${limitParam}) a), '[]'::jsonb)
   as attempts`;

const DELIVERY_COLUMNS = 'm.id, m.endpoint_id, m.type, m.status, m.created_at, m.next_attempt_at';

export function webhookRows(db: Queryable): WebhookRepository {
  return {
    async lockOwner(subject) {
      // Two keys: this feature's number and the owner's hash; held until the transaction ends.
      await db.query('select pg_advisory_xact_lock(7251023, hashtext($1))', [subject]);
      const [row] = await db.query<{ n: string | number }>(
        'select count(*) as n from webhook_endpoints where owner_subject = $1',
        [subject],
      );
      return Number(row?.n ?? 0);
    },

    async insertEndpoint(e, secret) {
      await db.query(
        `insert into webhook_endpoints (id, owner_subject, owner_customer_id, owner_staff, owner_directory_key, url,
           events, description, enabled, secret, version, created_at, updated_at, owner_roles_at)
         values ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $13, $14)`,
        [
          e.id,
          e.owner.subject,
          e.owner.customerId,
          e.owner.staff,
          e.owner.directoryKey,
          e.url,
          JSON.stringify(e.events),
          e.description,
          e.enabled,
          secret,
          e.version,
          e.createdAt,
          e.updatedAt,
          new Date(e.owner.rolesAt),
        ],
      );
    },

    async findEndpoint(ownerSubject, id) {
      const [row] = await db.query(
        `select ${ENDPOINT_COLUMNS} from webhook_endpoints where id = $1 and ($2::text is null or owner_subject = $2)`,
        [id, ownerSubject],
      );
      return row ? toEndpoint(row) : null;
    },

    async listEndpoints(ownerSubject, opts) {
      const params: unknown[] = [ownerSubject, opts.limit];
      let after = '';
      if (opts.after) {
        params.push(opts.after.createdAt, opts.after.id);
        after = 'and (created_at, id) < ($3::timestamptz, $4)';
      }
      const rows = await db.query(
        `select ${ENDPOINT_COLUMNS} from webhook_endpoints where ($1::text is null or owner_subject = $1) ${after}
         order by created_at desc, id desc limit $2`,
        params,
      );
      return rows.map(toEndpoint);
    },

    async updateEndpoint(id, expectedVersion, change: WebhookEndpointChange) {
      const rows = await db.query(
        `update webhook_endpoints set
           url = coalesce($3, url),
           events = coalesce($4::jsonb, events),
           description = case when $5 then $6 else description end,
           enabled = coalesce($7, enabled),
           disabled_reason = case when $7 is true then null else disabled_reason end,
           failing_since = case when $7 is true then null else failing_since end,
           version = version + 1,
           updated_at = clock_timestamp()
         where id = $1 and version = $2
         returning ${ENDPOINT_COLUMNS}`,
        [
          id,
          expectedVersion,
          change.url ?? null,
          change.events ? JSON.stringify(change.events) : null,
          change.description !== undefined,
          change.description ?? null,
          change.enabled ?? null,
        ],
      );
      return rows[0] ? toEndpoint(rows[0]) : null;
    },

    async deleteEndpoint(id, expectedVersion) {
      const rows = await db.query('delete from webhook_endpoints where id = $1 and version = $2 returning id', [
        id,
        expectedVersion,
      ]);
      return rows.length === 1;
    },

    async rotateSecret(id, expectedVersion, secret, previousUntil) {
      const rows = await db.query(
        `update webhook_endpoints set previous_secret = secret, previous_expires_at = $4, secret = $3,
           version = version + 1, updated_at = clock_timestamp()
         where id = $1 and version = $2
         returning ${ENDPOINT_COLUMNS}`,
        [id, expectedVersion, secret, previousUntil],
      );
      return rows[0] ? toEndpoint(rows[0]) : null;
    },

    async deliveries(endpointId, opts) {
      const params: unknown[] = [endpointId, opts.limit, opts.attempts];
      let after = '';
      if (opts.after) {
        params.push(opts.after.createdAt, opts.after.id);
        after = 'and (m.created_at, m.id) < ($4::timestamptz, $5)';
      }
      const rows = await db.query(
        `select ${DELIVERY_COLUMNS}, ${ATTEMPTS_OF('$3')}
         from webhook_messages m where m.endpoint_id = $1 ${after}
         order by m.created_at desc, m.id desc limit $2`,
        params,
      );
      return rows.map(toDelivery);
    },

    async findDelivery(endpointId, id, attempts) {
      const [row] = await db.query(
        `select ${DELIVERY_COLUMNS}, ${ATTEMPTS_OF('$3')}
         from webhook_messages m where m.endpoint_id = $1 and m.id = $2`,
        [endpointId, id, attempts],
      );
      return row ? toDelivery(row) : null;
    },

    async retryDelivery(endpointId, id) {
      // A message being sent right now keeps its claim: the retry is the attempt after that one.
      const rows = await db.query(
        `update webhook_messages set max_attempts = greatest(case when status = 'pending' then max_attempts else 0 end,
             attempts + 1 + case when status = 'pending' and claimed_until > now() then 1 else 0 end),
           status = 'pending',
           next_attempt_at = now()
         where endpoint_id = $1 and id = $2 returning id`,
        [endpointId, id],
      );
      return rows.length === 1;
    },

    async messageAbout(endpointId, id) {
      const [row] = await db.query<{ c: string | null }>(
        'select order_customer_id as c from webhook_messages where endpoint_id = $1 and id = $2',
        [endpointId, id],
      );
      return row ? row.c : undefined;
    },

    async noteOwnerRoles(subject, staff, at) {
      // A demotion wins over a promotion of the same second.
      await db.query(
        `update webhook_endpoints set owner_staff = $2, owner_roles_at = $3
         where owner_subject = $1
           and (owner_roles_at < $3 or (owner_roles_at = $3 and owner_staff and not $2::boolean))`,
        [subject, staff, at],
      );
    },

    async insertMessages(messages: readonly NewWebhookMessage[]) {
      if (!messages.length) return;
      await db.query(
        `insert into webhook_messages (id, endpoint_id, event_id, type, body, trace_parent, trace_state, max_attempts,
           order_customer_id, next_attempt_at)
         select m.id, m.endpoint_id, m.event_id, m.type, m.body, m.trace_parent, m.trace_state, m.max_attempts,
           m.order_customer_id, now()
         from unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[],
           $9::text[])
           as m(id, endpoint_id, event_id, type, body, trace_parent, trace_state, max_attempts, order_customer_id)`,
        [
          messages.map((m) => m.id),
          messages.map((m) => m.endpointId),
          messages.map((m) => m.eventId),
          messages.map((m) => m.type),
          messages.map((m) => m.body),
          messages.map((m) => m.trace?.traceparent ?? null),
          messages.map((m) => m.trace?.tracestate ?? null),
          messages.map((m) => m.maxAttempts),
          messages.map((m) => m.orderCustomerId),
        ],
      );
    },

    async enabledEndpoints() {
      const rows = await db.query(`select ${ENDPOINT_COLUMNS} from webhook_endpoints where enabled`);
      return rows.map(toEndpoint);
    },

    eventsAfter: (afterId, limit) => allEventsAfter(db, afterId, limit),

    async lockOutboxCursor() {
      const [row] = await db.query<{ last: string }>(
        'select last_event_id::text as last from webhook_outbox_cursor where id = 1 for update',
      );
      return row?.last ?? '0';
    },

    async advanceOutboxCursor(lastEventId) {
      await db.query('update webhook_outbox_cursor set last_event_id = $1::bigint where id = 1', [lastEventId]);
    },
  };
}

/** Finished messages (and their attempts) are kept for this long, for the delivery log. */
export const WEBHOOK_LOG_RETENTION_DAYS = 30;

export async function deleteOldWebhookMessages(db: Queryable): Promise<void> {
  await db.query(
    `delete from webhook_messages where status <> 'pending' and created_at < now() - make_interval(days => $1)`,
    [WEBHOOK_LOG_RETENTION_DAYS],
  );
}
