import type { GraphQLSchema } from 'graphql';
import type { EventChannel } from '../../domain/ports.js';
import type { Metrics } from '../observability/index.js';
import type { Pipeline } from '../pipeline/index.js';
import { createResultCache, type ResultCache, type ResultCacheOptions } from './resultCache/index.js';

/**
 * The event channel the domain publishes on, with the result cache's flush in front: this replica's writes flush it
 * at commit, before the write's response leaves; every other replica's come through the bus. The cache is made
 * later (it needs the pipeline, built after the services), but before any request can write.
 */
export function createEventChannel(bus: EventChannel) {
  let resultCache: ResultCache | undefined;
  const events: EventChannel = {
    publish(event) {
      resultCache?.onEvent(event, true);
      bus.publish(event);
    },
    listen: (listener) => bus.listen(listener),
  };
  return {
    events,
    /** The GraphQL result cache, when configured (RESULT_CACHE=on), flushed by every committed order event. */
    cacheResults(deps: {
      schema: GraphQLSchema;
      pipeline: Pipeline;
      metrics: Metrics;
      options: { readonly enabled: false } | ({ readonly enabled: true } & ResultCacheOptions);
      knownCustomerId: (subject: string) => string | undefined;
    }): ResultCache | undefined {
      if (!deps.options.enabled) return undefined;
      const cache = createResultCache({ ...deps, options: deps.options });
      bus.listen((event) => cache.onEvent(event));
      resultCache = cache;
      return cache;
    },
  };
}
