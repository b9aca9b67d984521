import type { Migration } from './migration.js';

/** Tracing's migrations (versions 40–49). */
export const TRACING_MIGRATIONS: readonly Migration[] = [
  {
    version: 40,
    name: 'order events carry their trace context',
    statements: [
      // The W3C traceparent and tracestate of the request that wrote the event, so that its delivery on any replica
      // (through Redis or the outbox poll) can be linked to it. Null when tracing was off.
      `alter table order_events add column trace_parent text, add column trace_state text`,
    ],
  },
];
