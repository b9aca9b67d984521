/**
 * What operators see: Prometheus metrics (and the port that serves them), the request log, the health and readiness
 * probes, and the counting wrappers. Imports nothing from the rest of http/.
 */
export { countedOpen, countingRefusals } from './counting.js';
export { createMetrics, Tally, type Metrics, type RefusalReason } from './metrics.js';
export { serveMetrics } from './metricsServer.js';
export { probes } from './probes.js';
export { requestLog, type RequestLogOptions } from './requestLog.js';
export { recordRequests } from './requestMetrics.js';
