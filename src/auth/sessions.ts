import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { User } from '../domain/policy.js';
import type { Queryable } from '../store/db.js';
import { deleteExpiredSessionRows, sessionRows, type SessionRecord } from '../store/sessions.js';

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
  /** The value of SCIM_LINK_CLAIM: what the directory knows the person by. */
  readonly directoryKey?: string;
  /** From the ID token: how the person signed in (`acr`, `amr`) and when (`auth_time`, ms since the epoch). */
  readonly acr?: string;
  readonly amr?: readonly string[];
  readonly authTime?: number;
}

export interface Session {
  readonly user: User;
  readonly expiresAt: Date;
}

function toSession(record: SessionRecord): Session {
  return {
    user: {
      kind: 'user',
      subject: record.subject,
      scopes: new Set(record.scopes),
      roles: new Set(record.roles),
      ...(record.name ? { name: record.name } : {}),
      ...(record.email ? { email: record.email } : {}),
      ...(record.directoryKey ? { directoryKey: record.directoryKey } : {}),
      ...(record.acr ? { acr: record.acr } : {}),
      ...(record.amr ? { amr: record.amr } : {}),
      ...(record.authTime ? { authTime: record.authTime.getTime() } : {}),
    },
    expiresAt: record.expiresAt,
  };
}

/**
 * Server-side state of browser sign-in, in PostgreSQL so that every replica sees a session (and its revocation)
 * at once. Times come from the database clock, the one clock all replicas share.
 */
export function createSessionStore(db: Queryable, opts: { loginAttemptsPerIp?: number } = {}) {
  const attemptsPerIp = opts.loginAttemptsPerIp ?? 50;
  const rows = sessionRows(db);
  return {
    /**
     * Stores a sign-in in progress; the returned id goes into the short-lived login cookie. Anyone can start one,
     * so each client IP keeps only its newest few: a flood from one address replaces its own rows, never grows.
     */
    async saveLoginAttempt(attempt: LoginAttempt, clientIp = 'unknown'): Promise<string> {
      const id = newId();
      await rows.saveLoginAttempt(hashId(id), attempt, clientIp, LOGIN_ATTEMPT_SECONDS, attemptsPerIp);
      return id;
    },

    /** Single use: the attempt is deleted as it is read, so a second callback with the same state finds nothing. */
    async takeLoginAttempt(id: string): Promise<LoginAttempt | null> {
      return ID_SHAPE.test(id) ? rows.takeLoginAttempt(hashId(id)) : null;
    },

    /** A fresh id for every sign-in: an id known before sign-in (session fixation) is never promoted. */
    async create(session: NewSession): Promise<{ id: string } & Session> {
      const id = newId();
      const record = await rows.createSession(
        hashId(id),
        {
          subject: session.subject,
          name: session.name ?? null,
          email: session.email ?? null,
          roles: [...session.roles],
          scopes: [...session.scopes],
          idToken: session.idToken ?? null,
          directoryKey: session.directoryKey ?? null,
          acr: session.acr ?? null,
          amr: session.amr ? [...session.amr] : null,
          authTime: session.authTime === undefined ? null : new Date(session.authTime),
        },
        ABSOLUTE_TIMEOUT_SECONDS,
      );
      return { id, ...toSession(record) };
    },

    /** The live session with this id, its idle clock restarted; null when unknown, idle too long, expired or revoked. */
    async touch(id: string): Promise<Session | null> {
      if (!ID_SHAPE.test(id)) return null;
      const record = await rows.touchSession(hashId(id), IDLE_TIMEOUT_SECONDS);
      return record ? toSession(record) : null;
    },

    /**
     * Of these session keys, the ones still live. An open stream counts as use, so their idle clocks restart
     * (at most once a minute, to spare writes).
     */
    async liveAmong(keys: readonly string[]): Promise<Set<string>> {
      return keys.length ? rows.liveAmong(keys, IDLE_TIMEOUT_SECONDS) : new Set();
    },

    /** Ends the session for every replica at once; returns its ID token for the identity provider's logout. */
    async revoke(id: string): Promise<{ idToken?: string } | null> {
      if (!ID_SHAPE.test(id)) return null;
      const revoked = await rows.revokeSession(hashId(id));
      if (!revoked) return null;
      return revoked.idToken ? { idToken: revoked.idToken } : {};
    },
  };
}

export type SessionStore = ReturnType<typeof createSessionStore>;

/** Reclaims space: sessions that can never authenticate again (expired, idle too long, revoked) and stale sign-ins. */
export function deleteExpiredSessions(db: Queryable): Promise<void> {
  return deleteExpiredSessionRows(db, IDLE_TIMEOUT_SECONDS);
}
