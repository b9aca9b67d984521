import type { CustomerResolvers } from '../generated/graphql.js';
import { connectionArgs } from './OrderConnection.js';

export const Customer: CustomerResolvers = {
  orders: (customer, { first }, { services, principal, loaders }) =>
    services.orders.ofCustomer(principal, customer.id, first, loaders),
  ordersConnection: (customer, args, { services, principal }) =>
    services.orders.connection(principal, connectionArgs(args), { customerId: customer.id }),
};
