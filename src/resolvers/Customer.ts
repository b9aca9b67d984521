import type { CustomerResolvers } from '../generated/graphql.js';

export const Customer: CustomerResolvers = {
  orders: (customer, { first }, { services, principal, loaders }) =>
    services.orders.ofCustomer(principal, customer.id, first, loaders),
};
