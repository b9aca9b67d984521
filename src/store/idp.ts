import type { JWK } from 'jose';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import { z } from 'zod';
import type { Queryable } from './db.js';

/** The embedded development identity provider's tables: users, signing keys, and oidc-provider's models. */

export interface IdpUserRecord {
  readonly username: string;
  readonly subject: string;
  readonly name: string;
  readonly email: string;
  readonly roles: string[];
  readonly passwordHash: string;
}

const UserRow = z.object({
  username: z.string(),
  subject: z.string(),
  name: z.string(),
  email: z.string(),
  // Entries that are not strings are ignored rather than failing the sign-in.
  roles: z.array(z.unknown()).catch([]),
  password_hash: z.string(),
});

const USER_COLUMNS = 'username, subject, name, email, roles, password_hash';

function toUser(row: unknown): IdpUserRecord {
  const r = UserRow.parse(row);
  return {
    username: r.username,
    subject: r.subject,
    name: r.name,
    email: r.email,
    roles: r.roles.filter((role): role is string => typeof role === 'string'),
    passwordHash: r.password_hash,
  };
}

export async function idpUsernames(db: Queryable): Promise<Set<string>> {
  const rows = await db.query('select username from idp_users');
  return new Set(rows.map((row) => z.object({ username: z.string() }).parse(row).username));
}

/** Inserts the user unless the username or subject is taken. */
export async function insertIdpUser(db: Queryable, user: IdpUserRecord): Promise<void> {
  await db.query(
    `insert into idp_users (${USER_COLUMNS}) values ($1, $2, $3, $4, $5::jsonb, $6)
     on conflict do nothing`,
    [user.username, user.subject, user.name, user.email, JSON.stringify(user.roles), user.passwordHash],
  );
}

export async function idpUserBy(
  db: Queryable,
  column: 'subject' | 'username',
  value: string,
): Promise<IdpUserRecord | undefined> {
  const [row] = await db.query(`select ${USER_COLUMNS} from idp_users where ${column} = $1`, [value]);
  return row ? toUser(row) : undefined;
}

/** What idp_keys row 1 holds: private signing keys and the secrets oidc-provider signs its cookies with. */
export interface IdpKeyRecord {
  readonly keys: JWK[];
  readonly cookieKeys: string[];
}

const SigningKey = z.looseObject({ kid: z.string(), alg: z.string(), d: z.string() });
const KeyRecord = z.object({
  keys: z.array(SigningKey).min(1),
  cookieKeys: z.array(z.string().min(1)).min(1),
});

export async function readIdpKeys(db: Queryable): Promise<IdpKeyRecord | undefined> {
  const [row] = await db.query('select jwks from idp_keys where id = 1');
  if (!row) return undefined;
  const parsed = KeyRecord.safeParse(z.object({ jwks: z.unknown() }).parse(row).jwks);
  if (!parsed.success) {
    throw new Error('embedded IdP: idp_keys row 1 does not hold the expected signing and cookie keys');
  }
  return { keys: parsed.data.keys as JWK[], cookieKeys: parsed.data.cookieKeys };
}

/** Stores the keys unless another replica stored its own first. */
export async function insertIdpKeys(db: Queryable, record: IdpKeyRecord): Promise<void> {
  await db.query('insert into idp_keys (id, jwks) values (1, $1::jsonb) on conflict (id) do nothing', [
    JSON.stringify(record),
  ]);
}

const ModelRow = z.object({ payload: z.record(z.string(), z.unknown()), consumed: z.coerce.number().nullable() });

/**
 * oidc-provider storage in idp_models, so sessions, codes and refresh tokens survive restarts and are
 * shared by every replica using the same database.
 */
export class PostgresAdapter implements Adapter {
  constructor(
    private readonly db: Queryable,
    private readonly model: string,
  ) {}

  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    const expiresAt = typeof expiresIn === 'number' ? Math.floor(Date.now() / 1000) + expiresIn : null;
    await this.db.query(
      `insert into idp_models (model, id, payload, grant_id, uid, user_code, expires_at, consumed_at)
       values ($1, $2, $3::jsonb, $4, $5, $6, to_timestamp($7), null)
       on conflict (model, id) do update set
         payload = excluded.payload, grant_id = excluded.grant_id, uid = excluded.uid,
         user_code = excluded.user_code, expires_at = excluded.expires_at, consumed_at = null`,
      [
        this.model,
        id,
        JSON.stringify(payload),
        payload.grantId ?? null,
        payload.uid ?? null,
        payload.userCode ?? null,
        expiresAt,
      ],
    );
  }

  find(id: string): Promise<AdapterPayload | undefined> {
    return this.findWhere('id', id);
  }

  findByUid(uid: string): Promise<AdapterPayload | undefined> {
    return this.findWhere('uid', uid);
  }

  findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
    return this.findWhere('user_code', userCode);
  }

  async consume(id: string): Promise<void> {
    await this.db.query('update idp_models set consumed_at = now() where model = $1 and id = $2', [this.model, id]);
  }

  async destroy(id: string): Promise<void> {
    await this.db.query('delete from idp_models where model = $1 and id = $2', [this.model, id]);
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    await this.db.query('delete from idp_models where model = $1 and grant_id = $2', [this.model, grantId]);
  }

  private async findWhere(column: 'id' | 'uid' | 'user_code', value: string): Promise<AdapterPayload | undefined> {
    // Expired rows may linger until the sweep removes them; they must already read as gone.
    const [row] = await this.db.query(
      `select payload, extract(epoch from consumed_at)::float8 as consumed
         from idp_models
        where model = $1 and ${column} = $2 and (expires_at is null or expires_at > now())
        limit 1`,
      [this.model, value],
    );
    if (!row) return undefined;
    const r = ModelRow.parse(row);
    const payload = r.payload as AdapterPayload;
    return r.consumed === null ? payload : { ...payload, consumed: Math.floor(r.consumed) };
  }
}

/** Removes expired provider state; rows are already invisible to find(), this only reclaims space. */
export async function sweepExpiredModels(db: Queryable): Promise<void> {
  await db.query('delete from idp_models where expires_at is not null and expires_at <= now()');
}
