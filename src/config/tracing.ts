import { z } from 'zod';
import { httpUrl, milliseconds, notAbove, optionalString, trueOrFalse, type Concern } from './values.js';

/** `key=value` pairs separated by commas, values percent-encoded (W3C Baggage's format, as OTEL_RESOURCE_ATTRIBUTES). */
function keyValuePairs(name: string) {
  return optionalString.transform((raw, ctx) => {
    const pairs: Record<string, string> = {};
    for (const item of (raw ?? '').split(',')) {
      if (!item.trim()) continue;
      const at = item.indexOf('=');
      const key = at > 0 ? item.slice(0, at).trim() : '';
      let value: string | undefined;
      try {
        value = at > 0 ? decodeURIComponent(item.slice(at + 1).trim()) : undefined;
      } catch {
        value = undefined;
      }
      if (!key || value === undefined || !/^[\x21-\x7e]+$/.test(key)) {
        ctx.addIssue({
          code: 'custom',
          message: `${name} must be comma-separated key=value pairs (values percent-encoded)`,
        });
        return z.NEVER;
      }
      pairs[key] = value;
    }
    return pairs;
  });
}

const otlpProtocol = (name: string) =>
  optionalString.pipe(
    z
      .enum(['http/protobuf', 'http/json'], {
        error: `${name} must be http/protobuf or http/json (gRPC is not built in)`,
      })
      .optional(),
  );

const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** OpenTelemetry's standard variables (the SDK's own environment reading is not used: this is the one check). */
const env = {
  OTEL_SDK_DISABLED: trueOrFalse('OTEL_SDK_DISABLED'),
  OTEL_TRACES_EXPORTER: optionalString.pipe(
    z.enum(['otlp', 'none'], { error: 'OTEL_TRACES_EXPORTER must be otlp or none' }).optional(),
  ),
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalString.pipe(httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT').optional()),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalString.pipe(httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT').optional()),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol('OTEL_EXPORTER_OTLP_PROTOCOL'),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'),
  OTEL_EXPORTER_OTLP_HEADERS: keyValuePairs('OTEL_EXPORTER_OTLP_HEADERS'),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: keyValuePairs('OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
  OTEL_EXPORTER_OTLP_TIMEOUT: optionalString.pipe(milliseconds(600_000).optional()),
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: optionalString.pipe(milliseconds(600_000).optional()),
  OTEL_SERVICE_NAME: z.string().trim().min(1).default('orders-api'),
  OTEL_RESOURCE_ATTRIBUTES: keyValuePairs('OTEL_RESOURCE_ATTRIBUTES'),
  OTEL_TRACES_SAMPLER: z
    .enum(TRACE_SAMPLERS, { error: `OTEL_TRACES_SAMPLER must be one of ${TRACE_SAMPLERS.join(', ')}` })
    .default('parentbased_always_on'),
  OTEL_TRACES_SAMPLER_ARG: optionalString.pipe(
    z.coerce
      .number<string | undefined>({ error: 'OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1' })
      .min(0, 'OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1')
      .max(1, 'OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1')
      .optional(),
  ),
  OTEL_BSP_SCHEDULE_DELAY: milliseconds(3_600_000).default(5000),
  OTEL_BSP_EXPORT_TIMEOUT: milliseconds(3_600_000).default(30_000),
  OTEL_BSP_MAX_QUEUE_SIZE: z.coerce.number().int().min(1).max(1_000_000).default(2048),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: z.coerce.number().int().min(1).max(1_000_000).default(512),
  OTEL_GRAPHQL_RESOLVER_SPANS: trueOrFalse('OTEL_GRAPHQL_RESOLVER_SPANS'),
};

type Protocol = 'http/protobuf' | 'http/json';

/** OpenTelemetry tracing: off unless an OTLP endpoint is configured (then the SDK is loaded, and only then). */
export const tracing = {
  model: z.object(env).transform((e) => {
    const base = e.OTEL_EXPORTER_OTLP_ENDPOINT;
    const url = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base ? `${base}/v1/traces` : undefined);
    // On when an OTLP endpoint is set, unless OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
    if (!url || e.OTEL_SDK_DISABLED || e.OTEL_TRACES_EXPORTER === 'none')
      return { tracing: { enabled: false as const } };
    return {
      tracing: {
        enabled: true as const,
        /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
        url,
        protocol: (e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ??
          e.OTEL_EXPORTER_OTLP_PROTOCOL ??
          'http/protobuf') as Protocol,
        /** Sent with every export (an API key, say); never logged. */
        headers: { ...e.OTEL_EXPORTER_OTLP_HEADERS, ...e.OTEL_EXPORTER_OTLP_TRACES_HEADERS },
        timeoutMs: e.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? e.OTEL_EXPORTER_OTLP_TIMEOUT ?? 10_000,
        serviceName: e.OTEL_SERVICE_NAME,
        resourceAttributes: e.OTEL_RESOURCE_ATTRIBUTES,
        sampler: e.OTEL_TRACES_SAMPLER,
        /** The traceidratio samplers' ratio (OTEL_TRACES_SAMPLER_ARG, 1 when unset). */
        ratio: e.OTEL_TRACES_SAMPLER_ARG ?? 1,
        batch: {
          scheduledDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
          exportTimeoutMs: e.OTEL_BSP_EXPORT_TIMEOUT,
          maxQueueSize: e.OTEL_BSP_MAX_QUEUE_SIZE,
          maxExportBatchSize: e.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
        },
        /** OTEL_GRAPHQL_RESOLVER_SPANS: a span per resolved field, for debugging; off by default (it costs). */
        resolverSpans: e.OTEL_GRAPHQL_RESOLVER_SPANS,
      },
    };
  }),
  rules: (raw) =>
    notAbove(
      raw,
      ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE],
      ['OTEL_BSP_MAX_QUEUE_SIZE', env.OTEL_BSP_MAX_QUEUE_SIZE],
      '',
    ),
} satisfies Concern<z.ZodType>;
