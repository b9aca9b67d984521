import { z } from 'zod';
import type { Queryable } from './db.js';

/** A sign-in in progress, as the callback needs it back. */
export interface LoginAttemptRecord {
  readonly state: string;
  readonly nonce: string;
  readonly codeVerifier: string;
  readonly returnTo: string;
}

/** A browser session, found by the hash of its id (the id itself is never stored). */
export interface SessionRecord {
  readonly subject: string;
  readonly name: string | null;
  readonly email: string | null;
  readonly roles: string[];
  readonly scopes: string[];
  /** The value of SCIM_LINK_CLAIM at sign-in, by which a deactivation finds the session. */
  readonly directoryKey: string | null;
  /** How the person signed in, from the session's ID token; null where the issuer did not say. */
  readonly acr: string | null;
  readonly amr: string[] | null;
  readonly authTime: Date | null;
  readonly expiresAt: Date;
}

const AttemptRow = z.object({
  state: z.string(),
  nonce: z.string(),
  code_verifier: z.string(),
  return_to: z.string(),
  live: z.boolean(),
});

const SessionRow = z.object({
  subject: z.string(),
  name: z.string().nullable(),
  email: z.string().nullable(),
  roles: z.array(z.string()),
  scopes: z.array(z.string()),
  directory_key: z.string().nullable(),
  acr: z.string().nullable(),
  amr: z.array(z.string()).nullable(),
  auth_time: z.coerce.date().nullable(),
  expires_at: z.coerce.date(),
});

const SESSION_COLUMNS = 'subject, name, email, roles, scopes, directory_key, acr, amr, auth_time, expires_at';

function toSession(row: unknown): SessionRecord {
  const r = SessionRow.parse(row);
  return {
    subject: r.subject,
    name: r.name,
    email: r.email,
    roles: r.roles,
    scopes: r.scopes,
    directoryKey: r.directory_key,
    acr: r.acr,
    amr: r.amr,
    authTime: r.auth_time,
    expiresAt: r.expires_at,
  };
}

/**
 * Server-side state of browser sign-in, in PostgreSQL so that every replica sees a session (and its revocation)
 * at once. Times come from the database clock, the one clock all replicas share.
 */
export function sessionRows(db: Queryable) {
  return {
    /**
     * Stores an attempt, then keeps only the newest `keepPerIp` of its address: a flood replaces its own rows.
     *
     * The trim locks the address's rows in one order every trim shares (newest first, by columns that never change)
     * before it deletes any: concurrent trims of one address then wait for each other instead of deadlocking, as they
     * did when each locked its victims in its own order (PostgreSQL answered 40P01, the start a 500). Waiting, a trim
     * holds nothing another trim has yet to take. The other writers of these rows never wait for a trim while holding
     * one of them: the callback deletes a single row, and the sweep skips locked rows. The last trim to start sees
     * every insert that came before it, so the bound is exact once starts settle. Expired rows of other addresses
     * are the sweep's to delete.
     */
    async saveLoginAttempt(
      idHash: string,
      attempt: LoginAttemptRecord,
      clientIp: string,
      ttlSeconds: number,
      keepPerIp: number,
    ): Promise<void> {
      await db.query(
        `insert into auth_login_attempts (id_hash, state, nonce, code_verifier, return_to, client_ip, expires_at)
         values ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))`,
        [idHash, attempt.state, attempt.nonce, attempt.codeVerifier, attempt.returnTo, clientIp, ttlSeconds],
      );
      // FOR UPDATE sits above the sort (and below OFFSET): rows are locked in this order, the kept ones included.
      await db.query(
        `delete from auth_login_attempts where id_hash in (
           select id_hash from auth_login_attempts where client_ip = $1
           order by created_at desc, id_hash desc offset $2
           for update)`,
        [clientIp, keepPerIp],
      );
    },

    /** Deletes the attempt as it reads it; null when there was none or it had expired. */
    async takeLoginAttempt(idHash: string): Promise<LoginAttemptRecord | null> {
      const [row] = await db.query(
        `delete from auth_login_attempts where id_hash = $1
         returning state, nonce, code_verifier, return_to, expires_at > now() as live`,
        [idHash],
      );
      if (!row) return null;
      const r = AttemptRow.parse(row);
      return r.live ? { state: r.state, nonce: r.nonce, codeVerifier: r.code_verifier, returnTo: r.return_to } : null;
    },

    async createSession(
      idHash: string,
      session: Omit<SessionRecord, 'expiresAt'> & { readonly idToken: string | null },
      ttlSeconds: number,
    ): Promise<SessionRecord> {
      // Expired sessions are the sweeper's to delete: a sign-in never waits on rows another caller holds.
      const [row] = await db.query(
        `insert into auth_sessions
           (id_hash, subject, name, email, roles, scopes, id_token, acr, amr, auth_time, expires_at, directory_key)
         values ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9::jsonb, $10::timestamptz,
                 now() + make_interval(secs => $11), $12)
         returning ${SESSION_COLUMNS}`,
        [
          idHash,
          session.subject,
          session.name,
          session.email,
          JSON.stringify(session.roles),
          JSON.stringify(session.scopes),
          session.idToken,
          session.acr,
          session.amr === null ? null : JSON.stringify(session.amr),
          session.authTime?.toISOString() ?? null,
          ttlSeconds,
          session.directoryKey,
        ],
      );
      return toSession(row);
    },

    /** The live session, its idle clock restarted; null when unknown, idle too long, expired or revoked. */
    async touchSession(idHash: string, idleSeconds: number): Promise<SessionRecord | null> {
      const [row] = await db.query(
        `update auth_sessions set last_seen_at = now()
         where id_hash = $1 and revoked_at is null and expires_at > now()
           and last_seen_at > now() - make_interval(secs => $2)
         returning ${SESSION_COLUMNS}`,
        [idHash, idleSeconds],
      );
      return row ? toSession(row) : null;
    },

    /** Of these hashes, the live sessions; their idle clocks restart at most once a minute, to spare writes. */
    async liveAmong(idHashes: readonly string[], idleSeconds: number): Promise<Set<string>> {
      const rows = await db.query(
        `with live as (
           select id_hash, last_seen_at from auth_sessions
           where id_hash in (select jsonb_array_elements_text($1::jsonb))
             and revoked_at is null and expires_at > now()
             and last_seen_at > now() - make_interval(secs => $2)
         ), touched as (
           update auth_sessions s set last_seen_at = now() from live
           where s.id_hash = live.id_hash and live.last_seen_at < now() - interval '60 seconds'
           returning s.id_hash
         )
         select id_hash from live`,
        [JSON.stringify(idHashes), idleSeconds],
      );
      return new Set(rows.map((row) => z.object({ id_hash: z.string() }).parse(row).id_hash));
    },

    /** Revokes a live session; returns its ID token (null if none was kept), or undefined when none was live. */
    async revokeSession(idHash: string): Promise<{ idToken: string | null } | undefined> {
      const [row] = await db.query(
        `update auth_sessions s set revoked_at = now(), id_token = null
         from (select id_hash, id_token from auth_sessions where id_hash = $1) old
         where s.id_hash = old.id_hash and s.revoked_at is null
         returning old.id_token`,
        [idHash],
      );
      return row ? { idToken: z.object({ id_token: z.string().nullable() }).parse(row).id_token } : undefined;
    },
  };
}

/** Reclaims space: sessions that can never authenticate again (expired, idle too long, revoked) and stale sign-ins. */
export async function deleteExpiredSessionRows(db: Queryable, idleSeconds: number): Promise<void> {
  // Rows a sign-in start has locked are skipped (the next sweep takes them): the sweep never waits for a start.
  await db.query(
    `delete from auth_login_attempts where id_hash in (
       select id_hash from auth_login_attempts where expires_at <= now() for update skip locked)`,
  );
  await db.query(
    `delete from auth_sessions
     where expires_at <= now() or revoked_at is not null or last_seen_at <= now() - make_interval(secs => $1)`,
    [idleSeconds],
  );
}

/** Revokes every live session of a directory key (its person was deactivated or removed); how many were. */
export async function revokeSessionsOf(db: Queryable, directoryKey: string): Promise<number> {
  const rows = await db.query(
    `update auth_sessions set revoked_at = now(), id_token = null
     where directory_key = $1 and revoked_at is null returning id_hash`,
    [directoryKey],
  );
  return rows.length;
}
