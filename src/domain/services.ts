import { createCatalogue } from './catalogue.js';
import { createCustomerService } from './customers.js';
import { createLoaders } from './loaders.js';
import { createOrderService } from './orderService.js';
import type { DirectoryFeed, EventChannel, Storage } from './ports.js';
import type { StepUpRule } from './policy.js';
import { createProvisioning } from './provisioning.js';
import { createSubscriptionService } from './subscriptions.js';

/** Every transport calls these; they hold the rules, including who may do what. */
export function createServices(
  storage: Storage,
  events: EventChannel,
  directory: DirectoryFeed,
  rules: { readonly stepUp: StepUpRule | null },
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
  return { catalogue, customers, orders, subscriptions, provisioning, loaders: () => createLoaders(storage) };
}

export type Services = ReturnType<typeof createServices>;
