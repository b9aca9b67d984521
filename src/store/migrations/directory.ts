import type { Migration } from './migration.js';

/** SCIM provisioning (versions 20-29): the directory's users and groups, and the deny list they imply. */
export const DIRECTORY_MIGRATIONS: readonly Migration[] = [
  {
    version: 20,
    name: 'directory users and groups',
    statements: [
      // One row per directory change, bumped in the transaction of every change: its row lock makes directory
      // writes take turns, so revisions are in commit order, and a replica that has seen revision N reads every
      // later change with `revision > N`.
      `create table directory_state (
         id       integer primary key check (id = 1),
         revision bigint not null
       )`,
      `insert into directory_state (id, revision) values (1, 0)`,
      // A user the directory sent. `external_id` links it to access tokens (SCIM_LINK_CLAIM, `sub` by default).
      // A deleted user stays as a row (deleted_at set, inactive): the deny list keeps refusing its tokens, so one
      // row per provisioned user bounds it. `tokens_valid_after`: tokens issued before the last deactivation stay
      // refused after a reactivation.
      `create table directory_users (
         id                 text primary key,
         user_name          text not null,
         external_id        text,
         display_name       text,
         name               jsonb,
         emails             jsonb not null default '[]',
         active             boolean not null,
         version            integer not null default 1 check (version >= 1),
         revision           bigint not null,
         tokens_valid_after timestamptz,
         created_at         timestamptz not null default now(),
         updated_at         timestamptz not null default now(),
         deleted_at         timestamptz
       )`,
      // userName is unique without regard to case (RFC 7643 §4.1.1: caseExact false), among users not deleted.
      `create unique index directory_users_user_name_idx on directory_users (lower(user_name)) where deleted_at is null`,
      // A subject can be linked to one user only: otherwise a deactivation could be undone by its twin.
      `create unique index directory_users_external_id_idx on directory_users (external_id)
         where external_id is not null and deleted_at is null`,
      `create index directory_users_revision_idx on directory_users (revision)`,
      `create index directory_users_created_idx on directory_users (created_at, id)`,
      `create table directory_groups (
         id           text primary key,
         display_name text not null,
         external_id  text,
         version      integer not null default 1 check (version >= 1),
         revision     bigint not null,
         created_at   timestamptz not null default now(),
         updated_at   timestamptz not null default now()
       )`,
      `create unique index directory_groups_display_name_idx on directory_groups (lower(display_name))`,
      `create index directory_groups_created_idx on directory_groups (created_at, id)`,
      `create table directory_members (
         group_id text not null references directory_groups (id) on delete cascade,
         user_id  text not null references directory_users (id),
         primary key (group_id, user_id)
       )`,
      `create index directory_members_user_idx on directory_members (user_id)`,
    ],
  },
  {
    version: 21,
    name: 'sessions know their directory key',
    statements: [
      // The value of SCIM_LINK_CLAIM at sign-in, so a deactivation revokes the person's sessions by it.
      `alter table auth_sessions add column directory_key text`,
      `create index auth_sessions_directory_key_idx on auth_sessions (directory_key) where directory_key is not null`,
    ],
  },
];
