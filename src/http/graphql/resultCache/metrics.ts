import { Counter, Gauge, type Registry } from 'prom-client';

/** The result cache's counters, and gauges read from its state at each scrape. */
export function resultCacheMetrics(registry: Registry, now: { entries(): number; bytes(): number; waiting(): number }) {
  new Gauge({
    name: 'result_cache_waiting',
    help: 'Requests waiting now for an identical query that is executing.',
    registers: [registry],
    collect() {
      this.set(now.waiting());
    },
  });
  new Gauge({
    name: 'result_cache_entries',
    help: 'Responses held in the result cache.',
    registers: [registry],
    collect() {
      this.set(now.entries());
    },
  });
  new Gauge({
    name: 'result_cache_bytes',
    help: 'Bytes the result cache counts against RESULT_CACHE_MAX_BYTES.',
    registers: [registry],
    collect() {
      this.set(now.bytes());
    },
  });
  return {
    hits: new Counter({
      name: 'result_cache_hits_total',
      help: 'GraphQL queries answered from the result cache.',
      registers: [registry],
    }),
    misses: new Counter({
      name: 'result_cache_misses_total',
      help: 'GraphQL queries looked up in the result cache and executed.',
      registers: [registry],
    }),
    flushes: new Counter({
      name: 'result_cache_flushes_total',
      help: 'Order events applied to the result cache (each flushes the entries that could hold the order).',
      registers: [registry],
    }),
    flushedEntries: new Counter({
      name: 'result_cache_flushed_entries_total',
      help: 'Result cache entries removed by order events.',
      registers: [registry],
    }),
    coalesced: new Counter({
      name: 'result_cache_coalesced_total',
      help: 'Hits that waited for an identical query already executing, instead of executing it again.',
      registers: [registry],
    }),
    staleStores: new Counter({
      name: 'result_cache_stale_stores_total',
      help: 'Results not stored because an order event arrived while they were computed.',
      registers: [registry],
    }),
  };
}

export type ResultCacheCounters = ReturnType<typeof resultCacheMetrics>;
