import type { Resolvers } from '../generated/graphql.js';
import { Customer } from './Customer.js';
import { DateTime } from './DateTime.js';
import { Mutation } from './Mutation.js';
import { Order } from './Order.js';
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
  Product,
  Customer,
  Viewer,
  WebhookEndpoint,
  DateTime,
};
