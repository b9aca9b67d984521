import { Counter, Gauge, type Registry } from 'prom-client';
import { exportStats } from './tracing.js';

/**
 * What the span exporter is doing, for operators: spans exported, dropped because the queue was full (the collector
 * slow or away: the queue is bounded, requests never wait), or lost in a failed export, and the queue's length
 * against its capacity. Read when /metrics is scraped; all zero while tracing is off.
 */
export function registerTracingMetrics(registry: Registry): void {
  const seen = { exported: 0, dropped: 0, failed: 0 };
  new Counter({
    name: 'tracing_spans_total',
    help: 'Finished spans by what became of them: exported, dropped (export queue full) or failed (export failed).',
    labelNames: ['outcome'] as const,
    registers: [registry],
    collect() {
      const stats = exportStats();
      if (!stats) return;
      for (const outcome of ['exported', 'dropped', 'failed'] as const) {
        const delta = stats[outcome] - seen[outcome];
        if (delta > 0) this.inc({ outcome }, delta);
        seen[outcome] = stats[outcome];
      }
    },
  });
  new Gauge({
    name: 'tracing_export_queue_spans',
    help: 'Spans waiting to be exported (bounded by OTEL_BSP_MAX_QUEUE_SIZE).',
    registers: [registry],
    collect() {
      this.set(exportStats()?.queued() ?? 0);
    },
  });
  new Gauge({
    name: 'tracing_export_queue_capacity',
    help: 'The most spans the export queue holds (OTEL_BSP_MAX_QUEUE_SIZE); past it, new spans are dropped.',
    registers: [registry],
    collect() {
      this.set(exportStats()?.capacity ?? 0);
    },
  });
}
