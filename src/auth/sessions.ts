import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { User } from '../domain/policy.js';
import type { Queryable } from '../store/db.js';

/** A session unused for this long ends (OWASP ASVS 3.3.2). */
export const IDLE_TIMEOUT_SECONDS = 30 * 60;
/** A session ends this long after sign-in, however active, so a stolen cookie does not live forever. */
export const ABSOLUTE_TIMEOUT_SECONDS = 12 * 60 * 60;
/** Time a person has to sign in at the identity provider. */
export const LOGIN_ATTEMPT_SECONDS = 10 * 60;

/** 256 bits from the CSPRNG; the cookie carries it, the database only its hash. */
function newId(): string {
  return randomBytes(32).toString('base64url');
}

const ID_SHAPE = /^[A-Za-z0-9_-]{43}$/;

function hashId(id: string): string {
  return createHash('sha256').update(id).digest('base64url');
}

/** What a session is known by outside its cookie: the hash of its id, never the id itself. */
export function sessionKey(id: string): string | null {
  return ID_SHAPE.test(id) ? hashId(id) : null;
}

/**
 * The CSRF token of a session's sign-out form (a synchronizer token without storage): an HMAC keyed by the session
 * id, which only the browser holding the HttpOnly cookie knows, so another site can neither read nor compute it.
 */
export function csrfTokenFor(sessionId: string): string {
  return createHmac('sha256', sessionId).update('orders-api sign-out').digest('base64url');
}

export function isCsrfTokenFor(sessionId: string, token: unknown): boolean {
  if (typeof token !== 'string') return false;
  const expected = Buffer.from(csrfTokenFor(sessionId));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export interface LoginAttempt {
  readonly state: string;
  readonly nonce: string;
  readonly codeVerifier: string;
  readonly returnTo: string;
}

export interface NewSession {
  readonly subject: string;
  readonly name?: string;
  readonly email?: string;
  readonly roles: readonly string[];
  readonly scopes: readonly string[];
  /** Kept only to send as `id_token_hint` when signing out at the identity provider. */
  readonly idToken?: string;
}

export interface Session {
  readonly user: User;
  readonly expiresAt: Date;
}

const AttemptRow = z.object({
  state: z.string(),
  nonce: z.string(),
  code_verifier: z.string(),
  return_to: z.string(),
});

const SessionRow = z.object({
  subject: z.string(),
  name: z.string().nullable(),
  email: z.string().nullable(),
  roles: z.array(z.string()),
  scopes: z.array(z.string()),
  expires_at: z.coerce.date(),
});

function toSession(row: unknown): Session {
  const r = SessionRow.parse(row);
  return {
    user: {
      kind: 'user',
      subject: r.subject,
      scopes: new Set(r.scopes),
      roles: new Set(r.roles),
      ...(r.name ? { name: r.name } : {}),
      ...(r.email ? { email: r.email } : {}),
    },
    expiresAt: r.expires_at,
  };
}

/**
 * Server-side state of browser sign-in, in PostgreSQL so that every replica sees a session (and its revocation)
 * at once. Times come from the database clock, the one clock all replicas share.
 */
export function createSessionStore(db: Queryable, opts: { loginAttemptsPerIp?: number } = {}) {
  const attemptsPerIp = opts.loginAttemptsPerIp ?? 50;
  return {
    /**
     * Stores a sign-in in progress; the returned id goes into the short-lived login cookie. Anyone can start one,
     * so each client IP keeps only its newest few: a flood from one address replaces its own rows, never grows.
     */
    async saveLoginAttempt(attempt: LoginAttempt, clientIp = 'unknown'): Promise<string> {
      const id = newId();
      await db.query(`delete from auth_login_attempts where expires_at <= now()`);
      await db.query(
        `insert into auth_login_attempts (id_hash, state, nonce, code_verifier, return_to, client_ip, expires_at)
         values ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))`,
        [
          hashId(id),
          attempt.state,
          attempt.nonce,
          attempt.codeVerifier,
          attempt.returnTo,
          clientIp,
          LOGIN_ATTEMPT_SECONDS,
        ],
      );
      await db.query(
        `delete from auth_login_attempts where id_hash in (
           select id_hash from auth_login_attempts where client_ip = $1
           order by created_at desc, expires_at desc offset $2)`,
        [clientIp, attemptsPerIp],
      );
      return id;
    },

    /** Single use: the attempt is deleted as it is read, so a second callback with the same state finds nothing. */
    async takeLoginAttempt(id: string): Promise<LoginAttempt | null> {
      if (!ID_SHAPE.test(id)) return null;
      const [row] = await db.query(
        `delete from auth_login_attempts where id_hash = $1
         returning state, nonce, code_verifier, return_to, expires_at > now() as live`,
        [hashId(id)],
      );
      if (!row || row.live !== true) return null;
      const r = AttemptRow.parse(row);
      return { state: r.state, nonce: r.nonce, codeVerifier: r.code_verifier, returnTo: r.return_to };
    },

    /** A fresh id for every sign-in: an id known before sign-in (session fixation) is never promoted. */
    async create(session: NewSession): Promise<{ id: string } & Session> {
      const id = newId();
      await db.query(`delete from auth_sessions where expires_at <= now()`);
      const [row] = await db.query(
        `insert into auth_sessions (id_hash, subject, name, email, roles, scopes, id_token, expires_at)
         values ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, now() + make_interval(secs => $8))
         returning subject, name, email, roles, scopes, expires_at`,
        [
          hashId(id),
          session.subject,
          session.name ?? null,
          session.email ?? null,
          JSON.stringify(session.roles),
          JSON.stringify(session.scopes),
          session.idToken ?? null,
          ABSOLUTE_TIMEOUT_SECONDS,
        ],
      );
      return { id, ...toSession(row) };
    },

    /** The live session with this id, its idle clock restarted; null when unknown, idle too long, expired or revoked. */
    async touch(id: string): Promise<Session | null> {
      if (!ID_SHAPE.test(id)) return null;
      const [row] = await db.query(
        `update auth_sessions set last_seen_at = now()
         where id_hash = $1 and revoked_at is null and expires_at > now()
           and last_seen_at > now() - make_interval(secs => $2)
         returning subject, name, email, roles, scopes, expires_at`,
        [hashId(id), IDLE_TIMEOUT_SECONDS],
      );
      return row ? toSession(row) : null;
    },

    /**
     * Of these session keys, the ones still live. An open stream counts as use, so their idle clocks restart
     * (at most once a minute, to spare writes).
     */
    async liveAmong(keys: readonly string[]): Promise<Set<string>> {
      if (!keys.length) return new Set();
      const rows = await db.query<{ id_hash: string }>(
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
        [JSON.stringify(keys), IDLE_TIMEOUT_SECONDS],
      );
      return new Set(rows.map((r) => r.id_hash));
    },

    /** Ends the session for every replica at once; returns its ID token for the identity provider's logout. */
    async revoke(id: string): Promise<{ idToken?: string } | null> {
      if (!ID_SHAPE.test(id)) return null;
      const [row] = await db.query<{ id_token: string | null }>(
        `update auth_sessions s set revoked_at = now(), id_token = null
         from (select id_hash, id_token from auth_sessions where id_hash = $1) old
         where s.id_hash = old.id_hash and s.revoked_at is null
         returning old.id_token`,
        [hashId(id)],
      );
      if (!row) return null;
      return row.id_token ? { idToken: row.id_token } : {};
    },
  };
}

export type SessionStore = ReturnType<typeof createSessionStore>;

/** Reclaims space: sessions that can never authenticate again (expired, idle too long, revoked) and stale sign-ins. */
export async function deleteExpiredSessions(db: Queryable): Promise<void> {
  await db.query(`delete from auth_login_attempts where expires_at <= now()`);
  await db.query(
    `delete from auth_sessions
     where expires_at <= now() or revoked_at is not null or last_seen_at <= now() - make_interval(secs => $1)`,
    [IDLE_TIMEOUT_SECONDS],
  );
}
