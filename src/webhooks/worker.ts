import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { newId } from '../domain/ids.js';
import { groupBy } from '../domain/loaders.js';
import type { Order, OrderItem } from '../domain/model.js';
import type {
  ClaimedWebhookMessage,
  NewWebhookMessage,
  Storage,
  WebhookAttemptRecord,
  WebhookQueue,
} from '../domain/ports.js';
import type { WebhookService } from '../domain/webhookService.js';
import { nextDelayMs } from '../domain/webhooks.js';
import type { AttemptResult, Sender } from './sender.js';

/** Events turned into messages per transaction. */
const OUTBOX_PAGE = 200;
/** A claim outlives the longest attempt by this much: time to record it, or to find the database back. */
export const LEASE_MARGIN_MS = 10_000;

/** What the worker reports; app.ts binds it to the metrics registry. */
export interface WebhookMetrics {
  attempt(result: AttemptResult | 'cancelled', seconds: number): void;
}

export interface DeliveryWorkerOptions {
  readonly storage: Storage;
  readonly queue: WebhookQueue;
  readonly service: Pick<WebhookService, 'plan' | 'refusal'>;
  readonly sender: Sender;
  /** The REST representation of an order: what `data.order` is. */
  readonly represent: (order: Order, items: readonly OrderItem[]) => unknown;
  readonly scheduleSeconds: readonly number[];
  readonly timeoutMs: number;
  readonly pollMs: number;
  /** Attempts in flight on this replica, to one endpoint, and for one owner (all their endpoints). */
  readonly concurrency: number;
  readonly perEndpoint: number;
  readonly perOwner: number;
  readonly disableAfterMs: number;
  readonly logger: Logger;
  readonly metrics: WebhookMetrics;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());

/**
 * Each replica's delivery loop: turn new outbox events into messages (replicas take turns on the outbox cursor, so
 * each event is turned once), then claim due messages, as many as the bounds leave room for, and send each. It runs
 * when an order event is committed anywhere (the event bus), when a message is queued here, when an attempt ends,
 * and on a poll, so a database that was down is found again without a restart.
 */
export function createDeliveryWorker(opts: DeliveryWorkerOptions) {
  const { storage, queue, sender, logger, metrics } = opts;
  const leaseMs = opts.timeoutMs + LEASE_MARGIN_MS;
  const maxAttempts = opts.scheduleSeconds.length;
  /** This replica's claims are marked with it: an attempt is recorded only while the claim is still ours. */
  const token = randomUUID();
  const inFlight = new Map<string, number>();
  const ownersInFlight = new Map<string, number>();
  const running = new Set<Promise<void>>();
  let total = 0;
  let pumping = false;
  let again = false;
  let closed = false;

  async function deriveMessages(): Promise<void> {
    for (;;) {
      const read = await storage.transaction(async (tx) => {
        const cursor = await tx.webhooks.lockOutboxCursor();
        const { events, lastId, skipped } = await tx.webhooks.eventsAfter(cursor, OUTBOX_PAGE);
        if (lastId === null) return 0;
        if (skipped.length) {
          logger.error(
            { event: 'webhook.outbox_unreadable', eventIds: skipped },
            'outbox rows that are not order events were passed over',
          );
        }
        const planned = opts.service.plan(events, await tx.webhooks.enabledEndpoints());
        if (planned.length) {
          const orderIds = [...new Set(planned.map((p) => p.event.order.id))];
          const items = groupBy(await tx.orders.itemsOf(orderIds), (i) => i.orderId);
          const bodies = new Map<string, string>();
          const messages: NewWebhookMessage[] = planned.map(({ endpoint, event, type }) => {
            const key = `${event.id}:${type}`;
            let body = bodies.get(key);
            if (body === undefined) {
              const order = opts.represent(event.order, items.get(event.order.id) ?? []);
              body = JSON.stringify({ type, timestamp: event.at.toISOString(), data: { order } });
              bodies.set(key, body);
            }
            return {
              id: newId('msg'),
              endpointId: endpoint.id,
              eventId: event.id,
              type,
              body,
              ...(event.trace ? { trace: event.trace } : {}),
              maxAttempts,
              orderCustomerId: event.order.customerId,
            };
          });
          await tx.webhooks.insertMessages(messages);
        }
        await tx.webhooks.advanceOutboxCursor(lastId);
        return events.length + skipped.length;
      });
      if (read < OUTBOX_PAGE) return;
    }
  }

  /** Records the attempt; while the database is away, tries again for as long as the claim lasts. */
  async function record(message: ClaimedWebhookMessage, attempt: WebhookAttemptRecord, claimedAt: number) {
    for (;;) {
      try {
        const kept = await queue.record(message.id, token, attempt, opts.disableAfterMs);
        if (!kept)
          logger.warn(
            { event: 'webhook.claim_lost', messageId: message.id },
            'a webhook claim ran out before its attempt was recorded',
          );
        return;
      } catch (err) {
        if (closed || Date.now() - claimedAt > leaseMs - 1000) {
          logger.warn(
            { event: 'webhook.record_failed', messageId: message.id, err },
            'recording a webhook attempt failed; the message will be sent again',
          );
          return;
        }
        await sleep(Math.min(1000, opts.pollMs));
      }
    }
  }

  async function deliver(message: ClaimedWebhookMessage, claimedAt: number): Promise<void> {
    const at = new Date();
    const refusal = opts.service.refusal(message.owner, message.orderCustomerId);
    if (refusal) {
      metrics.attempt('cancelled', 0);
      await record(
        message,
        {
          at,
          durationMs: 0,
          statusCode: null,
          error: refusal,
          status: 'cancelled',
          nextAttemptAt: null,
          counts: 'neither',
        },
        claimedAt,
      );
      return;
    }
    const outcome = await sender.send(message);
    metrics.attempt(outcome.result, outcome.durationMs / 1000);
    const made = message.attempts + 1;
    const ok = outcome.result === 'success';
    const delay = ok || made >= message.maxAttempts ? null : nextDelayMs(opts.scheduleSeconds, made);
    if (!ok) {
      logger.warn(
        {
          event: 'webhook.attempt_failed',
          messageId: message.id,
          endpointId: message.endpointId,
          attempt: made,
          result: outcome.result,
          statusCode: outcome.statusCode,
          error: outcome.error,
          retryInMs: delay,
        },
        delay === null ? 'webhook delivery failed; no attempts left' : 'webhook delivery attempt failed; retrying',
      );
    }
    await record(
      message,
      {
        at,
        durationMs: outcome.durationMs,
        statusCode: outcome.statusCode,
        error: outcome.error,
        status: ok ? 'delivered' : delay === null ? 'failed' : 'pending',
        nextAttemptAt: delay === null ? null : new Date(Date.now() + delay),
        counts: ok ? 'success' : 'failure',
      },
      claimedAt,
    );
    if (delay !== null && delay < opts.pollMs) setTimeout(() => void pump(), delay).unref();
  }

  function count(map: Map<string, number>, key: string, by: 1 | -1) {
    const now = (map.get(key) ?? 0) + by;
    if (now > 0) map.set(key, now);
    else map.delete(key);
  }

  function start(message: ClaimedWebhookMessage, claimedAt: number) {
    total++;
    count(inFlight, message.endpointId, 1);
    count(ownersInFlight, message.owner.subject, 1);
    const done = deliver(message, claimedAt)
      .catch((err: unknown) => logger.error({ err, messageId: message.id }, 'webhook delivery failed unexpectedly'))
      .finally(() => {
        total--;
        count(inFlight, message.endpointId, -1);
        count(ownersInFlight, message.owner.subject, -1);
        running.delete(done);
        void pump();
      });
    running.add(done);
  }

  async function pump(): Promise<void> {
    if (closed || opts.concurrency === 0) return;
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      do {
        again = false;
        await deriveMessages();
        while (!closed && total < opts.concurrency) {
          const claimedAt = Date.now();
          const claimed = await queue.claim({
            limit: opts.concurrency - total,
            perEndpoint: opts.perEndpoint,
            perOwner: opts.perOwner,
            inFlight,
            ownersInFlight,
            leaseMs,
            token,
          });
          for (const message of claimed) start(message, claimedAt);
          if (!claimed.length) break;
        }
      } while (again && !closed);
    } catch (err) {
      logger.warn(
        { event: 'webhook.pump_failed', err },
        'webhook delivery could not reach the database; retrying on the next poll',
      );
    } finally {
      pumping = false;
    }
  }

  // A replica with no delivery slots (WEBHOOK_CONCURRENCY=0) leaves the queue to the others.
  const poll = setInterval(() => void pump(), opts.pollMs);
  poll.unref();
  if (opts.concurrency === 0) clearInterval(poll);

  return {
    /** Something may be due: an order event committed, or a message was queued. */
    nudge(): void {
      void pump();
    },
    /** Stops claiming and waits for the attempts in flight (each bounded by the timeout) to be recorded. */
    async close(): Promise<void> {
      closed = true;
      clearInterval(poll);
      await Promise.allSettled([...running]);
      sender.close();
    },
  };
}

export type DeliveryWorker = ReturnType<typeof createDeliveryWorker>;
