import type { Context } from '../context.js';
import type { OrderEvent } from '../domain/model.js';
import type { SubscriptionResolvers } from '../generated/graphql.js';
import { clientError } from '../http/problems/index.js';

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
    subscribe: async (_parent, { id }, ctx) =>
      streamOf(ctx).events(
        await ctx.services.subscriptions.orderFeed(ctx.principal, { kinds: ['updated'], orderId: id }),
      ),
    resolve: eventOrder,
  },
  orderCreated: {
    subscribe: async (_parent, _args, ctx) =>
      streamOf(ctx).events(await ctx.services.subscriptions.orderFeed(ctx.principal, { kinds: ['created'] })),
    resolve: eventOrder,
  },
};
