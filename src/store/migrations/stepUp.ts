import type { Migration } from './migration.js';

/** Step-up authentication (RFC 9470): how a browser session signed in, and the embedded IdP's second factors. */
export const STEP_UP_MIGRATIONS: readonly Migration[] = [
  {
    version: 30,
    name: 'how a browser session signed in',
    statements: [
      // From the session's ID token: acr, amr (RFC 8176) and auth_time. Null where the issuer did not say.
      `alter table auth_sessions add column acr text`,
      `alter table auth_sessions add column amr jsonb`,
      `alter table auth_sessions add column auth_time timestamptz`,
    ],
  },
  {
    version: 31,
    name: 'embedded identity provider second factors',
    statements: [
      // One TOTP secret per user (RFC 6238). last_step is the time step of the last code accepted: a code of that
      // step or an earlier one is refused, so no code works twice. Kept in the database, so every replica agrees.
      `create table idp_totp (
         subject    text primary key references idp_users (subject) on delete cascade,
         secret     text not null,
         last_step  bigint,
         created_at timestamptz not null default now()
       )`,
      // WebAuthn credentials (passkeys). The public key is COSE, base64url; counter is the authenticator's signature
      // counter, which must grow (0 for authenticators that keep none).
      `create table idp_webauthn_credentials (
         id          text primary key,
         subject     text not null references idp_users (subject) on delete cascade,
         public_key  text not null,
         counter     bigint not null default 0,
         device_type text not null check (device_type in ('singleDevice', 'multiDevice')),
         backed_up   boolean not null default false,
         transports  jsonb not null default '[]',
         created_at  timestamptz not null default now(),
         last_used_at timestamptz
       )`,
      `create index idp_webauthn_credentials_subject_idx on idp_webauthn_credentials (subject)`,
      // Each challenge is good for one ceremony: taken (deleted) when a response is checked, whatever the outcome.
      `create table idp_webauthn_challenges (
         challenge   text primary key,
         purpose     text not null check (purpose in ('register', 'authenticate')),
         subject     text,
         interaction text,
         expires_at  timestamptz not null
       )`,
      `create index idp_webauthn_challenges_expires_idx on idp_webauthn_challenges (expires_at)`,
    ],
  },
];
