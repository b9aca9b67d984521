import { z } from 'zod';
import type { ClaimedWebhookMessage, WebhookQueue } from '../domain/ports.js';
import type { Database } from './db.js';

const ClaimedRow = z.object({
  id: z.string(),
  endpoint_id: z.string(),
  type: z.string(),
  body: z.string(),
  trace_parent: z.string().nullable(),
  trace_state: z.string().nullable(),
  attempts: z.coerce.number().int(),
  max_attempts: z.coerce.number().int(),
  url: z.string(),
  secret: z.string(),
  previous_secret: z.string().nullable(),
  owner_subject: z.string(),
  owner_customer_id: z.string(),
  owner_staff: z.boolean(),
  owner_directory_key: z.string().nullable(),
  owner_roles_at: z.string(),
  order_customer_id: z.string().nullable(),
});

function toClaimed(row: unknown): ClaimedWebhookMessage {
  const r = ClaimedRow.parse(row);
  return {
    id: r.id,
    endpointId: r.endpoint_id,
    type: r.type,
    body: r.body,
    ...(r.trace_parent
      ? { trace: { traceparent: r.trace_parent, ...(r.trace_state ? { tracestate: r.trace_state } : {}) } }
      : {}),
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    url: r.url,
    secrets: r.previous_secret ? [r.secret, r.previous_secret] : [r.secret],
    owner: {
      subject: r.owner_subject,
      customerId: r.owner_customer_id,
      staff: r.owner_staff,
      rolesAt: Date.parse(r.owner_roles_at),
      directoryKey: r.owner_directory_key,
    },
    orderCustomerId: r.order_customer_id,
  };
}

/**
 * The delivery queue over our own tables. A claim is `FOR UPDATE SKIP LOCKED` (replicas claiming at once never take
 * the same row) plus a lease, `claimed_until`: the claim is kept in the row, not in a transaction, so no
 * transaction stays open while a receiver is called, and a replica that dies mid-delivery loses its claim when the
 * lease runs out. Recording an attempt checks that the claim is still this replica's (`claim_token`).
 */
export function createWebhookQueue(db: Database): WebhookQueue {
  return {
    async claim({ limit, perEndpoint, perOwner, inFlight, ownersInFlight, leaseMs, token }) {
      if (limit <= 0) return [];
      // Ranked within each endpoint first, then within each owner among what the endpoint bound left: a slow
      // receiver holds its endpoint's slots, and one owner's many endpoints hold only that owner's.
      const rows = await db.query(
        `with due as (
           select byowner.id from (
             select ranked.id, ranked.next_attempt_at, ranked.owner_subject,
                    row_number() over (partition by ranked.owner_subject order by ranked.next_attempt_at, ranked.id) as o
             from (
               select m.id, m.endpoint_id, m.next_attempt_at, e.owner_subject,
                      row_number() over (partition by m.endpoint_id order by m.next_attempt_at, m.id) as n
               from webhook_messages m join webhook_endpoints e on e.id = m.endpoint_id
               where m.status = 'pending' and m.next_attempt_at <= now()
                 and (m.claimed_until is null or m.claimed_until < now())
                 and e.enabled
             ) ranked
             left join unnest($3::text[], $6::int[]) as busy(endpoint_id, n) on busy.endpoint_id = ranked.endpoint_id
             where ranked.n <= $2 - coalesce(busy.n, 0)
           ) byowner
           left join unnest($8::text[], $9::int[]) as owners(subject, n) on owners.subject = byowner.owner_subject
           where byowner.o <= $7 - coalesce(owners.n, 0)
           order by byowner.next_attempt_at, byowner.id
           limit $1
         ), locked as (
           select m.id from webhook_messages m join due on due.id = m.id
           where m.status = 'pending' and (m.claimed_until is null or m.claimed_until < now())
           for update of m skip locked
         )
         update webhook_messages m
         set claimed_until = now() + make_interval(secs => $4::double precision / 1000), claim_token = $5
         from locked, webhook_endpoints e
         where m.id = locked.id and e.id = m.endpoint_id
         returning m.id, m.endpoint_id, m.type, m.body, m.trace_parent, m.trace_state, m.attempts, m.max_attempts,
           e.url, e.secret, case when e.previous_expires_at > now() then e.previous_secret end as previous_secret,
           e.owner_subject, e.owner_customer_id, e.owner_staff, e.owner_directory_key, e.owner_roles_at,
           m.order_customer_id`,
        [
          limit,
          perEndpoint,
          [...inFlight.keys()],
          leaseMs,
          token,
          [...inFlight.values()],
          perOwner,
          [...ownersInFlight.keys()],
          [...ownersInFlight.values()],
        ],
      );
      return rows.map(toClaimed);
    },

    async record(id, token, attempt, disableAfterMs) {
      return db.transaction(async (tx) => {
        const [message] = await tx.query<{ endpoint_id: string }>(
          `update webhook_messages set status = $3, attempts = attempts + $4, next_attempt_at = coalesce($5, next_attempt_at),
             claimed_until = null, claim_token = null
           where id = $1 and claim_token = $2
           returning endpoint_id`,
          [id, token, attempt.status, attempt.status === 'cancelled' ? 0 : 1, attempt.nextAttemptAt],
        );
        if (!message) return false;
        if (attempt.status !== 'cancelled') {
          await tx.query(
            `insert into webhook_attempts (message_id, attempted_at, duration_ms, status_code, error)
             values ($1, $2, $3, $4, $5)`,
            [id, attempt.at, attempt.durationMs, attempt.statusCode, attempt.error],
          );
        }
        if (attempt.counts === 'success') {
          await tx.query(
            'update webhook_endpoints set failing_since = null where id = $1 and failing_since is not null',
            [message.endpoint_id],
          );
        } else if (attempt.counts === 'failure') {
          // Failing continuously for too long (no success since failing_since) disables the endpoint, visibly.
          await tx.query(
            `update webhook_endpoints set failing_since = coalesce(failing_since, $2::timestamptz),
               enabled = enabled and not coalesce(failing_since < $2::timestamptz - make_interval(secs => $3::double precision / 1000), false),
               disabled_reason = case
                 when enabled and coalesce(failing_since < $2::timestamptz - make_interval(secs => $3::double precision / 1000), false)
                 then 'failing continuously since ' || to_char(failing_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                 else disabled_reason end,
               version = version + case
                 when enabled and coalesce(failing_since < $2::timestamptz - make_interval(secs => $3::double precision / 1000), false)
                 then 1 else 0 end
             where id = $1`,
            [message.endpoint_id, attempt.at, disableAfterMs],
          );
        }
        return true;
      });
    },

    async backlogSeconds() {
      const [row] = await db.query<{ s: number | string | null }>(
        `select extract(epoch from now() - min(next_attempt_at)) as s from webhook_messages
         where status = 'pending' and next_attempt_at <= now()`,
      );
      return Math.max(0, Number(row?.s ?? 0));
    },
  };
}
