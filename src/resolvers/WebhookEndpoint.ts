import { entityTag } from '../domain/etags.js';
import type { WebhookEndpointResolvers } from '../generated/graphql.js';

export const WebhookEndpoint: WebhookEndpointResolvers = {
  events: (endpoint) => [...endpoint.events],
  etag: (endpoint) => entityTag(endpoint),
};
