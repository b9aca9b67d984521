import { z } from 'zod';
import type { OrderWithItems } from '../domain/model.js';
import type { IdempotencyRecord } from '../domain/ports.js';
import type { Queryable } from './db.js';
import { StoredOrder, StoredOrderItem } from './rows.js';

export const IDEMPOTENCY_TTL_HOURS = 24;

const KeyRow = z.object({ fingerprint: z.string(), order_id: z.string(), response: z.unknown() });

/** The `response` column holds the order and lines as first created (JSON, dates as ISO strings). */
const Created = z.object({ order: StoredOrder, items: z.array(StoredOrderItem) });

/** Records written before the column held a snapshot (an HTTP response, or null) read as having none. */
function toCreated(value: unknown): OrderWithItems | null {
  const parsed = Created.safeParse(typeof value === 'string' ? JSON.parse(value) : value);
  return parsed.success ? parsed.data : null;
}

/**
 * Claims (scope, key) for this transaction. False means another transaction holds it right now:
 * the first request with this key is still in flight.
 */
export async function claimKey(tx: Queryable, scope: string, key: string): Promise<boolean> {
  const [row] = await tx.query<{ claimed: boolean }>(
    'select pg_try_advisory_xact_lock(hashtextextended($1, 7251003)) as claimed',
    [JSON.stringify([scope, key])],
  );
  return row!.claimed;
}

export async function findKey(tx: Queryable, scope: string, key: string): Promise<IdempotencyRecord | null> {
  const [row] = await tx.query(
    `select fingerprint, order_id, response from idempotency_keys
     where scope = $1 and key = $2 and created_at > now() - make_interval(hours => $3)`,
    [scope, key, IDEMPOTENCY_TTL_HOURS],
  );
  if (!row) return null;
  const r = KeyRow.parse(row);
  return { fingerprint: r.fingerprint, orderId: r.order_id, created: toCreated(r.response) };
}

/** Records the key; an expired record under the same key is replaced. */
export async function saveKey(tx: Queryable, scope: string, key: string, record: IdempotencyRecord): Promise<void> {
  await tx.query(
    `insert into idempotency_keys (scope, key, fingerprint, order_id, response) values ($1, $2, $3, $4, $5::jsonb)
     on conflict (scope, key) do update
       set fingerprint = excluded.fingerprint, order_id = excluded.order_id,
           response = excluded.response, created_at = now()`,
    [scope, key, record.fingerprint, record.orderId, record.created === null ? null : JSON.stringify(record.created)],
  );
}

export async function deleteExpiredKeys(db: Queryable): Promise<void> {
  await db.query('delete from idempotency_keys where created_at < now() - make_interval(hours => $1)', [
    IDEMPOTENCY_TTL_HOURS,
  ]);
}
