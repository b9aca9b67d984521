import { z } from 'zod';
import type { Queryable } from './db.js';

/** The embedded identity provider's second factors: TOTP secrets, WebAuthn credentials and their challenges. */

/** A user's TOTP secret (Base32) and the time step of the last code accepted. */
export interface TotpRecord {
  readonly secret: string;
  readonly lastStep: number | null;
}

const TotpRow = z.object({ secret: z.string(), last_step: z.coerce.number().nullable() });

export async function totpOf(db: Queryable, subject: string): Promise<TotpRecord | undefined> {
  const [row] = await db.query('select secret, last_step from idp_totp where subject = $1', [subject]);
  if (!row) return undefined;
  const r = TotpRow.parse(row);
  return { secret: r.secret, lastStep: r.last_step };
}

/** Enrols a secret; `replace` decides whether an existing one gives way (re-enrolment) or stays (seeding). */
export async function saveTotp(db: Queryable, subject: string, secret: string, replace: boolean): Promise<void> {
  await db.query(
    `insert into idp_totp (subject, secret) values ($1, $2)
     on conflict (subject) do ${replace ? 'update set secret = excluded.secret, last_step = null, created_at = now()' : 'nothing'}`,
    [subject, secret],
  );
}

/**
 * Records that the code of `step` was used. True only for the first caller of a step later than any used before:
 * concurrent submissions of one code race on this row, and only one of them wins (RFC 6238 §5.2).
 */
export async function claimTotpStep(db: Queryable, subject: string, step: number): Promise<boolean> {
  const rows = await db.query(
    `update idp_totp set last_step = $2 where subject = $1 and (last_step is null or last_step < $2) returning subject`,
    [subject, step],
  );
  return rows.length === 1;
}

export interface WebauthnCredentialRecord {
  /** base64url credential id, as the authenticator names it. */
  readonly id: string;
  readonly subject: string;
  /** COSE public key, base64url. */
  readonly publicKey: string;
  readonly counter: number;
  readonly deviceType: 'singleDevice' | 'multiDevice';
  readonly backedUp: boolean;
  readonly transports: string[];
}

const CredentialRow = z.object({
  id: z.string(),
  subject: z.string(),
  public_key: z.string(),
  counter: z.coerce.number(),
  device_type: z.enum(['singleDevice', 'multiDevice']),
  backed_up: z.boolean(),
  transports: z.array(z.string()).catch([]),
});

const CREDENTIAL_COLUMNS = 'id, subject, public_key, counter, device_type, backed_up, transports';

function toCredential(row: unknown): WebauthnCredentialRecord {
  const r = CredentialRow.parse(row);
  return {
    id: r.id,
    subject: r.subject,
    publicKey: r.public_key,
    counter: r.counter,
    deviceType: r.device_type,
    backedUp: r.backed_up,
    transports: r.transports,
  };
}

export async function credentialsOf(db: Queryable, subject: string): Promise<WebauthnCredentialRecord[]> {
  const rows = await db.query(
    `select ${CREDENTIAL_COLUMNS} from idp_webauthn_credentials where subject = $1 order by created_at`,
    [subject],
  );
  return rows.map(toCredential);
}

export async function credentialById(db: Queryable, id: string): Promise<WebauthnCredentialRecord | undefined> {
  const [row] = await db.query(`select ${CREDENTIAL_COLUMNS} from idp_webauthn_credentials where id = $1`, [id]);
  return row ? toCredential(row) : undefined;
}

/** False when the credential id is already registered (to anyone). */
export async function insertCredential(db: Queryable, credential: WebauthnCredentialRecord): Promise<boolean> {
  const rows = await db.query(
    `insert into idp_webauthn_credentials (${CREDENTIAL_COLUMNS})
     values ($1, $2, $3, $4, $5, $6, $7::jsonb) on conflict (id) do nothing returning id`,
    [
      credential.id,
      credential.subject,
      credential.publicKey,
      credential.counter,
      credential.deviceType,
      credential.backedUp,
      JSON.stringify(credential.transports),
    ],
  );
  return rows.length === 1;
}

/**
 * Stores the signature counter of a verified assertion, if it still moves forward: two assertions racing with one
 * counter value (a cloned authenticator, or a replay) cannot both be recorded. Authenticators that keep no counter
 * report 0 every time.
 */
export async function advanceCounter(db: Queryable, id: string, from: number, to: number): Promise<boolean> {
  const rows = await db.query(
    `update idp_webauthn_credentials set counter = $3, last_used_at = now()
      where id = $1 and counter = $2 and ($3 > $2 or $3 = 0) returning id`,
    [id, from, to],
  );
  return rows.length === 1;
}

export interface WebauthnChallenge {
  readonly challenge: string;
  readonly purpose: 'register' | 'authenticate';
  /** Whose ceremony it is, when known before it starts (registration, a second factor). */
  readonly subject: string | null;
  /** The sign-in interaction it belongs to (authentication). */
  readonly interaction: string | null;
}

export async function saveChallenge(db: Queryable, challenge: WebauthnChallenge, ttlSeconds: number): Promise<void> {
  await db.query(`delete from idp_webauthn_challenges where expires_at <= now()`);
  await db.query(
    `insert into idp_webauthn_challenges (challenge, purpose, subject, interaction, expires_at)
     values ($1, $2, $3, $4, now() + make_interval(secs => $5))`,
    [challenge.challenge, challenge.purpose, challenge.subject, challenge.interaction, ttlSeconds],
  );
}

const ChallengeRow = z.object({
  challenge: z.string(),
  purpose: z.enum(['register', 'authenticate']),
  subject: z.string().nullable(),
  interaction: z.string().nullable(),
  live: z.boolean(),
});

/** Deletes the challenge as it reads it: a ceremony's answer is checked once, whatever the outcome. */
export async function takeChallenge(db: Queryable, challenge: string): Promise<WebauthnChallenge | undefined> {
  const [row] = await db.query(
    `delete from idp_webauthn_challenges where challenge = $1
     returning challenge, purpose, subject, interaction, expires_at > now() as live`,
    [challenge],
  );
  if (!row) return undefined;
  const r = ChallengeRow.parse(row);
  return r.live
    ? { challenge: r.challenge, purpose: r.purpose, subject: r.subject, interaction: r.interaction }
    : undefined;
}

/** One live enrolment code per user, kept (hashed) beside oidc-provider's models so the sweep deletes it expired. */
const ENROLMENT_MODEL = 'EnrolmentCode';

/** Stores the hash of a new enrolment code for `subject`, replacing any earlier one; returns when it expires. */
export async function saveEnrolmentCode(db: Queryable, subject: string, hash: string, ttlSeconds: number) {
  const [row] = await db.query(
    `insert into idp_models (model, id, payload, expires_at)
     values ($1, $2, jsonb_build_object('hash', $3::text), now() + make_interval(secs => $4))
     on conflict (model, id) do update set payload = excluded.payload, expires_at = excluded.expires_at
     returning expires_at`,
    [ENROLMENT_MODEL, subject, hash, ttlSeconds],
  );
  return z.coerce.date().parse(row!.expires_at);
}

/**
 * Whether `hash` is `subject`'s live enrolment code; `take` also spends it, so that of two requests racing with one
 * code only one binds a factor.
 */
export async function enrolmentCodeIsLive(
  db: Queryable,
  subject: string,
  hash: string,
  take: boolean,
): Promise<boolean> {
  const rows = await db.query(
    `${take ? 'delete' : 'select id'} from idp_models
      where model = $1 and id = $2 and payload->>'hash' = $3 and expires_at > now()
      ${take ? 'returning id' : ''}`,
    [ENROLMENT_MODEL, subject, hash],
  );
  return rows.length === 1;
}
