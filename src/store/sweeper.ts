import type { Logger } from 'pino';
import type { Database, Queryable } from './db.js';
import { deleteExpiredProofIds } from './dpopReplay.js';
import { deleteOldEvents } from './events.js';
import { deleteExpiredKeys } from './idempotency.js';
import { deleteOldWebhookMessages } from './webhooks.js';

/** Advisory lock key of the sweep; other keys in use: 7251001 (migrations), 7251003, 7251004. */
const SWEEP_LOCK = 7251006;

export type SweepTask = (tx: Queryable) => Promise<void>;

/** The store's own expired rows; the parts above it add theirs (sessions, the embedded IdP's state). */
export const EXPIRED_ROWS: Readonly<Record<string, SweepTask>> = {
  idempotencyKeys: deleteExpiredKeys,
  orderEvents: deleteOldEvents,
  dpopProofIds: deleteExpiredProofIds,
  webhookMessages: deleteOldWebhookMessages,
};

export interface Sweeper {
  /** One sweep now; false when another replica holds the sweep lock (it is sweeping). */
  runOnce(): Promise<boolean>;
  /** Stops the timer and waits for a sweep in progress. */
  stop(): Promise<void>;
}

/**
 * Deletes expired rows on a timer. Every replica runs the timer, but a transaction-level advisory lock lets one
 * sweep at a time; the others skip that round rather than wait, and the lock goes with the transaction even if the
 * replica dies mid-sweep.
 */
export function createSweeper(deps: {
  db: Database;
  tasks: Readonly<Record<string, SweepTask>>;
  intervalMs: number;
  logger: Logger;
}): Sweeper {
  const { db, tasks, logger } = deps;
  let running: Promise<boolean> | null = null;
  let stopped = false;

  const sweep = () =>
    db.transaction(async (tx) => {
      const [row] = await tx.query<{ locked: boolean }>('select pg_try_advisory_xact_lock($1) as locked', [SWEEP_LOCK]);
      if (!row?.locked) return false;
      for (const task of Object.values(tasks)) await task(tx);
      return true;
    });

  const runOnce = () => {
    running ??= sweep().finally(() => (running = null));
    return running;
  };

  const timer = setInterval(() => {
    if (!stopped) runOnce().catch((err: unknown) => logger.warn({ err }, 'sweeping expired rows failed'));
  }, deps.intervalMs);
  timer.unref();

  return {
    runOnce,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
}
