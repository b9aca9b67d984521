import { createCatalogue } from './catalogue.js';
import { createCustomerService } from './customers.js';
import { Loaders } from './loaders.js';
import { createNodes } from './nodes.js';
import { createOrderService } from './orderService.js';
import type { DirectoryFeed, EventChannel, Storage } from './ports.js';
import type { StepUpRule, User } from './policy.js';
import { createProvisioning } from './provisioning.js';
import { createSubscriptionService } from './subscriptions.js';
import { createWebhookService, type WebhookTargetCheck } from './webhookService.js';

/** Every transport calls these; they hold the rules, including who may do what. */
export function createServices(
  storage: Storage,
  events: EventChannel,
  directory: DirectoryFeed,
  rules: { readonly stepUp: StepUpRule | null },
  webhooks: {
    /** The directory's verdicts, for owners of endpoints outside any request. */
    readonly directory: { admit(user: User): User | null };
    readonly targets: WebhookTargetCheck;
    readonly requireHttps: boolean;
    readonly maxAttempts: number;
    readonly onQueued: () => void;
  },
) {
  const catalogue = createCatalogue(storage.products);
  const customers = createCustomerService(storage.customers);
  const orders = createOrderService({
    storage,
    catalogue,
    customers,
    onEvent: (event) => events.publish(event),
    stepUp: rules.stepUp,
  });
  const subscriptions = createSubscriptionService({ outbox: storage.events, bus: events, customers, orders });
  const provisioning = createProvisioning({ storage, feed: directory });
  const webhookEndpoints = createWebhookService({ storage, customers, stepUp: rules.stepUp, ...webhooks });
  const nodes = createNodes({ customers, webhookEndpoint: (principal, id) => webhookEndpoints.get(principal, id) });
  return {
    catalogue,
    customers,
    orders,
    subscriptions,
    provisioning,
    webhooks: webhookEndpoints,
    nodes,
    loaders: () => new Loaders(storage),
  };
}

export type Services = ReturnType<typeof createServices>;
