import type { Logger } from 'pino';
import type { Database } from '../../store/db.js';
import type { Metrics } from './metrics.js';

/** The database's statements and its availability, counted and logged (the circuit opening and closing). */
export function observeDatabase(db: Database, metrics: Metrics, logger: Logger): void {
  db.onStatement = () => metrics.sqlStatements.inc();
  db.onAvailability = (available, cause) => {
    metrics.databaseUnreachable.set(available ? 0 : 1);
    if (available) logger.info({ event: 'database.reachable' }, 'the database answers again');
    else
      logger.warn(
        { event: 'database.unreachable', err: cause },
        'the database does not take connections: requests are answered 503 at once until a probe connects',
      );
  };
}

/** What webhook delivery reports, bound to the registry: each attempt, and the queue's backlog when scraped. */
export function webhookMetrics(metrics: Metrics, queue: { backlogSeconds(): Promise<number> }) {
  metrics.webhookBacklog.source = () => queue.backlogSeconds();
  return {
    attempt(result: string, seconds: number) {
      metrics.webhookDeliveries.inc({ result });
      if (result !== 'cancelled') metrics.webhookDeliverySeconds.observe(seconds);
    },
  };
}
