import { z } from 'zod';
import { HTTP_ENV, nodeEnvOf } from './http.js';
import { optionalString, valueOf, type Concern } from './values.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const env = {
  NODE_ENV: nodeEnvOf,
  METRICS_PORT: optionalString.pipe(
    z
      .string()
      .optional()
      .refine(
        (v) => v === undefined || v === 'off' || (/^\d{1,5}$/.test(v) && Number(v) <= 65535),
        'METRICS_PORT must be a port (0 picks a free one) or off',
      )
      .transform((v) => (v === undefined ? undefined : v === 'off' ? null : Number(v))),
  ),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  REQUEST_LOG_SAMPLE: z.coerce.number().min(0).max(1).default(0),
};

/** Metrics and logs (tracing has a concern of its own). */
export const observability = {
  model: z.object(env).transform((e) => ({
    /** Where GET /metrics is served, on the same host but never on the public port; 0 picks one, null is off. */
    // Test servers run many to a process: each takes a free port unless told otherwise.
    metricsPort: e.METRICS_PORT === undefined ? (e.NODE_ENV === 'test' ? 0 : 9464) : e.METRICS_PORT,
    logLevel: e.LOG_LEVEL,
    /** Share (0–1) of successful requests whose `request completed` line is logged at info; the rest go to debug. */
    requestLogSample: e.REQUEST_LOG_SAMPLE,
  })),
  rules: (raw) => {
    const port = valueOf(HTTP_ENV.PORT, raw.PORT);
    return port !== undefined && port !== 0 && valueOf(env.METRICS_PORT, raw.METRICS_PORT) === port
      ? ['METRICS_PORT: must differ from PORT (metrics are never served on the public port)']
      : [];
  },
} satisfies Concern<z.ZodType>;
