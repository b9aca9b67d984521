import type { Database } from '../store/db.js';
import { createCatalogue } from './catalogue.js';
import { createCustomerService } from './customers.js';
import { createLoaders } from './loaders.js';
import { createOrderService } from './orderService.js';

/** Every transport calls these; they hold the rules, including who may do what. */
export function createServices(db: Database) {
  const catalogue = createCatalogue(db);
  const customers = createCustomerService(db);
  const orders = createOrderService({ db, catalogue, customers });
  return { catalogue, customers, orders, loaders: () => createLoaders(db) };
}

export type Services = ReturnType<typeof createServices>;
