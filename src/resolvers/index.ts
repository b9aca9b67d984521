import type { Resolvers } from '../generated/graphql.js';
import { Customer } from './Customer.js';
import { DateTime } from './DateTime.js';
import { Mutation } from './Mutation.js';
import { Node } from './Node.js';
import { Order } from './Order.js';
import { OrderConnection } from './OrderConnection.js';
import { OrderItem } from './OrderItem.js';
import { Product } from './Product.js';
import { Query } from './Query.js';
import { Subscription } from './Subscription.js';
import { Viewer } from './Viewer.js';
import { WebhookEndpoint } from './WebhookEndpoint.js';

export const resolvers: Resolvers = {
  Query,
  Mutation,
  Subscription,
  Order,
  OrderItem,
  OrderConnection,
  Node,
  Product,
  Customer,
  Viewer,
  WebhookEndpoint,
  DateTime,
};
