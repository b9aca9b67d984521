import type { OrderItemResolvers } from '../generated/graphql.js';

export const OrderItem: OrderItemResolvers = {
  lineTotalCents: (item) => item.qty * item.unitPriceCents,
  product: (item, _args, { services }) => services.catalogue.bySku(item.sku),
};
