import type { Adapter, AdapterPayload } from 'oidc-provider';
import type { Queryable } from '../../store/db.js';

interface ModelRow {
  payload: AdapterPayload;
  consumed: number | null;
}

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
    const [row] = await this.db.query<ModelRow>(
      `select payload, extract(epoch from consumed_at)::float8 as consumed
         from idp_models
        where model = $1 and ${column} = $2 and (expires_at is null or expires_at > now())
        limit 1`,
      [this.model, value],
    );
    if (!row) return undefined;
    return row.consumed === null ? row.payload : { ...row.payload, consumed: Math.floor(row.consumed) };
  }
}

/** Removes expired provider state; rows are already invisible to find(), this only reclaims space. */
export async function sweepExpiredModels(db: Queryable): Promise<void> {
  await db.query('delete from idp_models where expires_at is not null and expires_at <= now()');
}
