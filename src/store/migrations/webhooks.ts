import type { Migration } from './migration.js';

/** Webhooks' migrations (versions 50–59): endpoints, the messages each is sent, and their attempts. */
export const WEBHOOK_MIGRATIONS: readonly Migration[] = [
  {
    version: 50,
    name: 'webhook endpoints, messages and attempts',
    statements: [
      // An endpoint belongs to the principal that created it and receives what that principal may read: the owner is
      // kept as the visibility rule needs it (subject, customer, staff role) and as the directory knows them (key).
      // The secret is kept as it is: signing needs it. A rotation keeps the previous one until previous_expires_at.
      `create table webhook_endpoints (
         id                  text primary key,
         owner_subject       text not null,
         owner_customer_id   text not null,
         owner_staff         boolean not null,
         owner_directory_key text,
         url                 text not null,
         events              jsonb not null,
         description         text,
         enabled             boolean not null default true,
         disabled_reason     text,
         secret              text not null,
         previous_secret     text,
         previous_expires_at timestamptz,
         failing_since       timestamptz,
         version             integer not null default 1,
         created_at          timestamptz not null,
         updated_at          timestamptz not null
       )`,
      `create index webhook_endpoints_owner_idx on webhook_endpoints (owner_subject, created_at desc, id desc)`,
      // One message per endpoint and event: its id is the webhook-id, the same on every attempt. The body is the
      // exact text signed and sent, made once when the message is derived from the outbox. A replica claims a due
      // message until claimed_until (a lease): if it dies, the lease runs out and another replica sends it again.
      `create table webhook_messages (
         id              text primary key,
         endpoint_id     text not null references webhook_endpoints (id) on delete cascade,
         event_id        bigint,
         type            text not null,
         body            text not null,
         trace_parent    text,
         trace_state     text,
         status          text not null default 'pending'
                           check (status in ('pending', 'delivered', 'failed', 'cancelled')),
         attempts        integer not null default 0,
         max_attempts    integer not null,
         next_attempt_at timestamptz not null,
         claimed_until   timestamptz,
         claim_token     text,
         created_at      timestamptz not null default now()
       )`,
      `create index webhook_messages_due_idx on webhook_messages (next_attempt_at) where status = 'pending'`,
      `create index webhook_messages_endpoint_idx on webhook_messages (endpoint_id, created_at desc, id desc)`,
      `create table webhook_attempts (
         id           bigint generated always as identity primary key,
         message_id   text not null references webhook_messages (id) on delete cascade,
         attempted_at timestamptz not null,
         duration_ms  integer not null,
         status_code  integer,
         error        text
       )`,
      `create index webhook_attempts_message_idx on webhook_attempts (message_id, id)`,
      // How far into the outbox messages have been derived. Replicas take turns on this row, so each event is turned
      // into messages once; it starts at the newest event, so events from before webhooks existed are not sent.
      `create table webhook_outbox_cursor (
         id            integer primary key check (id = 1),
         last_event_id bigint not null
       )`,
      `insert into webhook_outbox_cursor (id, last_event_id) select 1, coalesce(max(id), 0) from order_events`,
    ],
  },
  {
    version: 51,
    name: 'webhook owners roles as of their newest credential, and whose order each message is about',
    statements: [
      // The staff role follows the owner's newest credential seen (its issue time), not the one that created it.
      `alter table webhook_endpoints add column owner_roles_at timestamptz`,
      `update webhook_endpoints set owner_roles_at = created_at`,
      `alter table webhook_endpoints alter column owner_roles_at set not null`,
      // Who may still be sent a message is decided when it is sent and when it is retried, by the order's customer.
      `alter table webhook_messages add column order_customer_id text`,
      `update webhook_messages set order_customer_id = body::jsonb #>> '{data,order,customer_id}' where event_id is not null`,
    ],
  },
];
