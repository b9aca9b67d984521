import type { Database } from '../store/db.js';
import type { EventBus } from '../store/eventBus.js';
import { createCatalogue } from './catalogue.js';
import { createCustomerService } from './customers.js';
import { createLoaders } from './loaders.js';
import { createOrderService } from './orderService.js';
import { createSubscriptionService } from './subscriptions.js';

/** Every transport calls these; they hold the rules, including who may do what. */
export function createServices(db: Database, bus: EventBus) {
  const catalogue = createCatalogue(db);
  const customers = createCustomerService(db);
  const orders = createOrderService({ db, catalogue, customers, onEvent: (event) => bus.publish(event) });
  const subscriptions = createSubscriptionService({ db, bus, customers, orders });
  return { catalogue, customers, orders, subscriptions, loaders: () => createLoaders(db) };
}

export type Services = ReturnType<typeof createServices>;
