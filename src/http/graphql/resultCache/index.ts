import type { GraphQLSchema } from 'graphql';
import type { OrderEvent } from '../../../domain/model.js';
import type { Metrics } from '../../observability/index.js';
import type { Pipeline } from '../../pipeline/index.js';
import { createFlights } from './flight.js';
import { createKeying } from './keying.js';
import { resultCacheMetrics } from './metrics.js';
import { createServing } from './serving.js';
import { createEntryStore } from './store.js';

export interface ResultCacheOptions {
  /** Bytes of stored responses (and their keys and documents), per replica. */
  readonly maxBytes: number;
  /** No entry lives longer than this, whatever the events say (the catalogue changes without one). */
  readonly ttlSeconds: number;
  /** A request whose key (variables, operation name, Accept, caller) is longer is executed and never stored. */
  readonly maxKeyBytes: number;
}

/**
 * The GraphQL result cache (RESULT_CACHE=on): pre-serialized responses to queries, in memory per replica, keyed by
 * document hash, operation name, variables, Accept and who is asking (keying.ts). Order events flush every entry
 * that could hold the order (store.ts); a response computed from a read that began before a flush is not stored;
 * identical requests wait for one execution (flight.ts); serving.ts answers before Apollo and stores after it.
 */
export function createResultCache(deps: {
  schema: GraphQLSchema;
  pipeline: Pipeline;
  metrics: Metrics;
  options: ResultCacheOptions;
  /** The customer id a subject is known by in this process, without asking the database. */
  knownCustomerId: (subject: string) => string | undefined;
}) {
  const { options } = deps;
  const store = createEntryStore(options);
  const flights = createFlights();
  const counters = resultCacheMetrics(deps.metrics.registry, {
    entries: store.entries,
    bytes: store.bytes,
    waiting: flights.waiting,
  });
  const keying = createKeying({
    schema: deps.schema,
    maxKeyBytes: options.maxKeyBytes,
    knownCustomerId: deps.knownCustomerId,
  });
  return {
    ...createServing({ pipeline: deps.pipeline, keying, flights, store, counters }),

    /**
     * An order changed: every entry that could hold it goes, and results being computed now are not stored. `local`
     * marks the flush at commit on the replica that made the change; the bus then brings the same event again.
     */
    onEvent(event: OrderEvent, local = false) {
      const removed = store.flush(event, local);
      if (removed === null) return;
      counters.flushes.inc();
      if (removed) counters.flushedEntries.inc(removed);
    },

    /** Entries and bytes held now (tests). */
    // eslint-disable-next-line no-restricted-syntax -- one object per app, made at start-up
    get size() {
      return { entries: store.entries(), bytes: store.bytes() };
    },
  };
}

export type ResultCache = ReturnType<typeof createResultCache>;
