import type { QueryResolvers } from '../generated/graphql.js';
import { connectionArgs } from './OrderConnection.js';

export const Query: QueryResolvers = {
  order: (_parent, { id }, { services, principal }) => services.orders.get(principal, id),
  recentOrders: async (_parent, { first }, { services, principal }) =>
    (await services.orders.list(principal, { first })).orders,
  products: async (_parent, _args, { services }) => [...(await services.catalogue.list())],
  product: (_parent, { sku }, { services }) => services.catalogue.bySku(sku),
  viewer: (_parent, _args, { principal }) => (principal.kind === 'user' ? principal : null),
  webhookEndpoints: async (_parent, { first }, { services, principal }) =>
    (await services.webhooks.list(principal, { first })).items,
  webhookEndpoint: (_parent, { id }, { services, principal }) => services.webhooks.get(principal, id),
  orders: (_parent, args, { services, principal }) => services.orders.connection(principal, connectionArgs(args)),
  node: (_parent, { id }, { services, principal, loaders }) => services.nodes.one(principal, id, loaders),
  nodes: (_parent, { ids }, { services, principal, loaders }) => services.nodes.many(principal, ids, loaders),
};
