import type { Context } from '../context.js';
import type { OrderEvent } from '../domain/model.js';
import type { SubscriptionResolvers } from '../generated/graphql.js';
import { clientError } from '../http/problems/graphqlErrors.js';

function streamOf(ctx: Context) {
  if (!ctx.stream) {
    throw clientError('Subscriptions are served over WebSocket (graphql-ws) and server-sent events.', 'BAD_REQUEST');
  }
  return ctx.stream;
}

/** Each event is a fresh execution: new loaders, so nothing cached for an earlier event is served stale. */
function eventOrder(event: OrderEvent, _args: unknown, ctx: Context) {
  ctx.loaders = ctx.services.loaders();
  ctx.eventId = event.id;
  return event.order;
}

export const Subscription: SubscriptionResolvers = {
  orderUpdated: {
    subscribe: (_parent, { id }, ctx) =>
      ctx.services.subscriptions.orderEvents(ctx.principal, { kinds: ['updated'], orderId: id }, streamOf(ctx)),
    resolve: eventOrder,
  },
  orderCreated: {
    subscribe: (_parent, _args, ctx) =>
      ctx.services.subscriptions.orderEvents(ctx.principal, { kinds: ['created'] }, streamOf(ctx)),
    resolve: eventOrder,
  },
};
