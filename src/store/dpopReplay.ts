import type { Redis } from 'ioredis';
import type { ProofReplayStore } from '../domain/ports.js';
import type { Queryable } from './db.js';

/** SET NX with the proof's own expiry: one round trip, atomic across replicas, gone when no longer needed. */
export function redisReplayStore(redis: Redis, prefix = 'orders-api:dpop-jti:'): ProofReplayStore {
  return {
    async claim(key, expiresAt) {
      const ttl = Math.max(1, expiresAt.getTime() - Date.now());
      return (await redis.set(prefix + key, '1', 'PX', ttl, 'NX')) === 'OK';
    },
    close() {},
  };
}

/** Used proof ids past their expiry: deleted by the shared sweeper, one replica at a time. */
export async function deleteExpiredProofIds(tx: Queryable): Promise<void> {
  await tx.query('delete from dpop_proof_jtis where expires_at < now()');
}

/**
 * The table's primary key makes a second claim fail on every replica sharing the database; an expired
 * row is taken over in place, and the sweeper deletes the rest so the table holds minutes of proofs.
 */
export function databaseReplayStore(db: Queryable): ProofReplayStore {
  return {
    async claim(key, expiresAt) {
      const rows = await db.query(
        `insert into dpop_proof_jtis (key, expires_at) values ($1, $2::timestamptz)
         on conflict (key) do update set expires_at = excluded.expires_at
           where dpop_proof_jtis.expires_at < $3::timestamptz
         returning key`,
        [key, expiresAt.toISOString(), new Date().toISOString()],
      );
      return rows.length === 1;
    },
    close() {},
  };
}
