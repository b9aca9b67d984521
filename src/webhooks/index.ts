/**
 * Webhook delivery: the address guard, the signed HTTP sender and each replica's delivery loop over the queue. The
 * rules (who gets what, the schedule) are the domain's; the queue's SQL is the store's; app.ts wires them.
 */
export { blockedBecause, createTargetGuard, systemLookup, type HostLookup, type ResolvedAddress } from './addresses.js';
export {
  prepareWebhookDelivery,
  startWebhookDelivery,
  type PreparedDelivery,
  type WebhookSettings,
} from './delivery.js';
export {
  createSender,
  MAX_RESPONSE_BYTES,
  type AttemptResult,
  type CreateConnection,
  type Sender,
  type SenderOptions,
} from './sender.js';
export { notingOwnerRoles } from './ownerRoles.js';
export { createDeliveryWorker, LEASE_MARGIN_MS, type DeliveryWorker, type WebhookMetrics } from './worker.js';
