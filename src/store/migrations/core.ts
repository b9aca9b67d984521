import type { Migration } from './migration.js';

/** The service's first seven migrations: orders, the embedded IdP, idempotency keys, sessions, events, DPoP. */
export const CORE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'orders',
    statements: [
      `create table products (
         sku         text primary key,
         name        text not null,
         price_cents integer not null check (price_cents > 0)
       )`,
      `create table customers (
         id         text primary key,
         subject    text unique,
         name       text not null,
         email      text,
         created_at timestamptz not null default now()
       )`,
      `create table orders (
         id          text primary key,
         customer_id text not null references customers (id),
         status      text not null check (status in ('pending', 'paid', 'shipped', 'delivered', 'cancelled')),
         total_cents integer not null check (total_cents >= 0),
         version     integer not null default 1 check (version >= 1),
         created_at  timestamptz not null,
         updated_at  timestamptz not null
       )`,
      // recentOrders for staff, and for customers; both read newest first.
      `create index orders_recent_idx on orders (created_at desc, id desc)`,
      `create index orders_customer_recent_idx on orders (customer_id, created_at desc, id desc)`,
      `create table order_items (
         order_id         text not null references orders (id) on delete cascade,
         line_no          smallint not null,
         sku              text not null references products (sku),
         qty              integer not null check (qty between 1 and 999),
         unit_price_cents integer not null check (unit_price_cents > 0),
         primary key (order_id, line_no)
       )`,
    ],
  },
  {
    version: 2,
    name: 'embedded identity provider',
    statements: [
      `create table idp_users (
         username      text primary key,
         subject       text not null unique,
         name          text not null,
         email         text not null,
         roles         jsonb not null default '[]',
         password_hash text not null
       )`,
      `create table idp_keys (
         id         integer primary key check (id = 1),
         jwks       jsonb not null,
         created_at timestamptz not null default now()
       )`,
      `create table idp_models (
         model       text not null,
         id          text not null,
         payload     jsonb not null,
         grant_id    text,
         uid         text,
         user_code   text,
         expires_at  timestamptz,
         consumed_at timestamptz,
         primary key (model, id)
       )`,
      `create index idp_models_grant_idx on idp_models (grant_id) where grant_id is not null`,
      `create index idp_models_uid_idx on idp_models (uid) where uid is not null`,
      `create index idp_models_expires_idx on idp_models (expires_at) where expires_at is not null`,
    ],
  },
  {
    version: 3,
    name: 'idempotency keys',
    statements: [
      // One row per (caller, key), written in the same transaction as the order it created.
      // No foreign key: deleting the order must not forget the key, or a retry would create it again.
      `create table idempotency_keys (
         scope       text not null,
         key         text not null,
         fingerprint text not null,
         order_id    text not null,
         response    jsonb,
         created_at  timestamptz not null default now(),
         primary key (scope, key)
       )`,
      `create index idempotency_keys_created_idx on idempotency_keys (created_at)`,
    ],
  },
  {
    version: 4,
    name: 'browser sessions',
    statements: [
      // One row per browser sign-in in progress, found by the hash of the id in its short-lived cookie and
      // deleted when the callback uses it, so a replayed state finds nothing.
      `create table auth_login_attempts (
         id_hash       text primary key,
         state         text not null,
         nonce         text not null,
         code_verifier text not null,
         return_to     text not null,
         created_at    timestamptz not null default now(),
         expires_at    timestamptz not null
       )`,
      `create index auth_login_attempts_expires_idx on auth_login_attempts (expires_at)`,
      // Only the SHA-256 of a session id is stored: a copy of this table cannot be replayed as cookies.
      `create table auth_sessions (
         id_hash      text primary key,
         subject      text not null,
         name         text,
         email        text,
         roles        jsonb not null default '[]',
         scopes       jsonb not null default '[]',
         id_token     text,
         created_at   timestamptz not null default now(),
         last_seen_at timestamptz not null default now(),
         expires_at   timestamptz not null,
         revoked_at   timestamptz
       )`,
      `create index auth_sessions_expires_idx on auth_sessions (expires_at)`,
    ],
  },
  {
    version: 5,
    name: 'order events',
    statements: [
      // The outbox of order changes, written in the transaction of the change. Ids are handed out
      // under a lock held until commit, so they are in commit order: a reader that has seen id N
      // will never later find a committed event below N (subscribers resume without gaps).
      `create table order_events (
         id          bigint generated always as identity primary key,
         kind        text not null check (kind in ('created', 'updated', 'deleted')),
         order_id    text not null,
         customer_id text not null,
         payload     jsonb not null,
         created_at  timestamptz not null default now()
       )`,
      `create index order_events_created_idx on order_events (created_at)`,
    ],
  },
  {
    version: 6,
    name: 'login attempts per client',
    statements: [
      // Anyone can start a sign-in: each client address keeps only its newest few attempts.
      `alter table auth_login_attempts add column client_ip text not null default 'unknown'`,
      `create index auth_login_attempts_client_idx on auth_login_attempts (client_ip, created_at)`,
    ],
  },
  {
    version: 7,
    name: 'dpop proof ids',
    statements: [
      // DPoP proofs already used (RFC 9449 §11.1), kept until they would be refused as too old anyway.
      // The key is a SHA-256 of the proof's key thumbprint and jti: bounded size, whatever the client sent.
      `create table dpop_proof_jtis (
         key        text primary key,
         expires_at timestamptz not null
       )`,
      `create index dpop_proof_jtis_expires_idx on dpop_proof_jtis (expires_at)`,
    ],
  },
];
