import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ProofReplayStore } from '../auth/dpop.js';
import type { Database } from './db.js';

const SWEEP_INTERVAL_MS = 5 * 60_000;

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

/**
 * The table's primary key makes a second claim fail on every replica sharing the database; an expired
 * row is taken over in place, and a periodic sweep deletes the rest so the table holds minutes of proofs.
 */
export async function databaseReplayStore(db: Database, logger: Logger): Promise<ProofReplayStore> {
  const sweep = () =>
    db
      .query('delete from dpop_proof_jtis where expires_at < now()')
      .catch((err: unknown) => logger.warn({ err }, 'sweeping used DPoP proof ids failed'));
  await sweep();
  const sweeper = setInterval(sweep, SWEEP_INTERVAL_MS);
  sweeper.unref();
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
    close() {
      clearInterval(sweeper);
    },
  };
}
