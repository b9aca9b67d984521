import type { Logger } from 'pino';
import type { Order, OrderItem } from '../domain/model.js';
import type { Storage, WebhookQueue } from '../domain/ports.js';
import type { WebhookService } from '../domain/webhookService.js';
import { createSender, type CreateConnection, type Sender } from './sender.js';
import { createDeliveryWorker, type DeliveryWorker, type WebhookMetrics } from './worker.js';
import type { HostLookup } from './addresses.js';

/** WEBHOOK_* (config's `webhooks`), as delivery reads them. */
export interface WebhookSettings {
  readonly timeoutMs: number;
  readonly retryScheduleSeconds: readonly number[];
  readonly allowPrivateUrls: boolean;
  readonly pollMs: number;
  readonly concurrency: number;
  readonly endpointConcurrency: number;
  readonly ownerConcurrency: number;
  readonly disableAfterSeconds: number;
}

export interface PreparedDelivery {
  readonly settings: WebhookSettings;
  readonly sender: Sender;
  readonly logger: Logger;
  /** What the domain's webhook service is told of delivery: which targets pass, how many attempts, a new message. */
  readonly rules: {
    readonly targets: Sender['targets'];
    readonly requireHttps: boolean;
    readonly maxAttempts: number;
    readonly onQueued: () => void;
  };
  readonly started: { worker?: DeliveryWorker };
}

/**
 * The sender, and what the webhook service needs from delivery. The service tells the worker of each queued message
 * and the worker asks the service whom an event goes to, so delivery is prepared before the services and started
 * after them (startWebhookDelivery), before any request.
 */
export function prepareWebhookDelivery(deps: {
  config: { readonly webhooks: WebhookSettings; readonly isProduction: boolean };
  /** How deliveries reach the network (tests map names to addresses and count sockets); Node's own when absent. */
  network?: { readonly lookup?: HostLookup; readonly createConnection?: CreateConnection };
  logger: Logger;
}): PreparedDelivery {
  const { logger } = deps;
  const { webhooks: settings, isProduction: production } = deps.config;
  if (settings.allowPrivateUrls && production) {
    logger.warn(
      { event: 'webhooks.private_urls_allowed' },
      'WEBHOOK_ALLOW_PRIVATE_URLS is on: webhooks may call http and loopback, private and metadata addresses',
    );
  }
  const sender = createSender({
    timeoutMs: settings.timeoutMs,
    allowPrivate: settings.allowPrivateUrls,
    // Endpoints may share a host: the per-endpoint bound is the claim's, the sockets only the replica's.
    maxSocketsPerHost: Math.max(1, settings.concurrency),
    ...deps.network,
  });
  const started: { worker?: DeliveryWorker } = {};
  return {
    settings,
    sender,
    logger: logger.child({ component: 'webhooks' }),
    rules: {
      targets: sender.targets,
      requireHttps: production && !settings.allowPrivateUrls,
      maxAttempts: settings.retryScheduleSeconds.length,
      onQueued: () => started.worker?.nudge(),
    },
    started,
  };
}

/** This replica's delivery loop, woken by every committed order event (from any replica) and started at once. */
export function startWebhookDelivery(
  prepared: PreparedDelivery,
  deps: {
    storage: Storage;
    queue: WebhookQueue;
    service: Pick<WebhookService, 'plan' | 'refusal'>;
    /** The REST representation of an order: what `data.order` is. */
    represent: (order: Order, items: readonly OrderItem[]) => unknown;
    events: { listen(listener: () => void): unknown };
    metrics: WebhookMetrics;
  },
): DeliveryWorker {
  const { settings } = prepared;
  const worker = createDeliveryWorker({
    storage: deps.storage,
    queue: deps.queue,
    service: deps.service,
    sender: prepared.sender,
    represent: deps.represent,
    scheduleSeconds: settings.retryScheduleSeconds,
    timeoutMs: settings.timeoutMs,
    pollMs: settings.pollMs,
    concurrency: settings.concurrency,
    perEndpoint: settings.endpointConcurrency,
    perOwner: settings.ownerConcurrency,
    disableAfterMs: settings.disableAfterSeconds * 1000,
    logger: prepared.logger,
    metrics: deps.metrics,
  });
  prepared.started.worker = worker;
  deps.events.listen(() => worker.nudge());
  worker.nudge();
  return worker;
}
