import { orderEtag } from '../domain/etags.js';
import type { Customer } from '../domain/model.js';
import type { OrderResolvers, OrderStatus } from '../generated/graphql.js';

export const Order: OrderResolvers = {
  // The loader's own promise, not one more per row. The foreign key keeps its customer from being null; were it so,
  // graphql-js would refuse the null for Order.customer: Customer!, and the error is masked and logged as any other.
  customer: (order, _args, { loaders }) => loaders.customer.load(order.customerId) as Promise<Customer>,
  items: (order, _args, { loaders }) => loaders.orderItems.load(order.id),
  etag: (order) => orderEtag(order),
  state: (order) => order.status.toUpperCase() as OrderStatus,
};
