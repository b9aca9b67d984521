/**
 * What operators see: Prometheus metrics (and the port that serves them), the request log, the health and readiness
 * probes, the counting wrappers, and tracing: its setup (OpenTelemetry's SDK, loaded only when configured) and the
 * HTTP server span. Imports nothing from the rest of http/.
 */
export { countedOpen, countingRefusals } from './counting.js';
export { requestAttributes, traceRequests } from './httpSpans.js';
export { createMetrics, Tally, type Metrics, type RefusalReason } from './metrics.js';
export { serveMetrics } from './metricsServer.js';
export { probes } from './probes.js';
export { requestLog, type RequestLogOptions } from './requestLog.js';
export { observeDatabase, webhookMetrics } from './reporting.js';
export { requestRecorder } from './requestMetrics.js';
export { startTracing } from './tracing.js';
