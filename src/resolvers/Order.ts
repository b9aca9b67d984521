import { orderEtag } from '../domain/etags.js';
import type { OrderResolvers, OrderStatus } from '../generated/graphql.js';

export const Order: OrderResolvers = {
  customer: async (order, _args, { loaders }) => {
    const customer = await loaders.customer.load(order.customerId);
    // The foreign key makes this impossible; if it happens the error is masked and logged.
    if (!customer) throw new Error(`order ${order.id} references missing customer ${order.customerId}`);
    return customer;
  },
  items: (order, _args, { loaders }) => loaders.orderItems.load(order.id),
  etag: (order) => orderEtag(order),
  state: (order) => order.status.toUpperCase() as OrderStatus,
};
