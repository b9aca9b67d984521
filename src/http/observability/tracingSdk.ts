import {
  context,
  createNoopMeter,
  propagation,
  ROOT_CONTEXT,
  trace,
  type Attributes as OtelAttributes,
  type Context as OtelContext,
  type Link,
  type MeterProvider,
  type Span as OtelSpan,
  type TextMapGetter,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  ExportResultCode,
  setGlobalErrorHandler,
  W3CTraceContextPropagator,
  type ExportResult,
} from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { ATTR_ERROR_TYPE, ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { ATTR_SERVICE_INSTANCE_ID } from '@opentelemetry/semantic-conventions/incubating';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { TraceSampler, TracingConfig } from '../../config/index.js';
import {
  TRACEPARENT,
  type CarrierInput,
  type Parent,
  type Span,
  type SpanKind,
  type SpanOptions,
  type TraceCarrier,
  type Tracing,
} from '../../tracing.js';

type EnabledConfig = Extract<TracingConfig, { enabled: true }>;

/** What the batch processor reports of its queue, read when /metrics is scraped. */
export interface ExportStats {
  readonly capacity: number;
  queued(): number;
  exported: number;
  /** Dropped because the queue was full (the collector too slow or away). */
  dropped: number;
  /** Handed to the exporter, which failed to deliver them. */
  failed: number;
}

const KINDS: Record<SpanKind, number> = { internal: 0, server: 1, client: 2, producer: 3, consumer: 4 };

/** Header values as the W3C propagator reads them: strings only (a `connection_init` payload can hold anything). */
const getter: TextMapGetter<CarrierInput> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    const value = carrier[key];
    if (typeof value === 'string') return value;
    return Array.isArray(value) && typeof value[0] === 'string' ? (value[0] as string) : undefined;
  },
};

function samplerFor(kind: TraceSampler, ratio: number): Sampler {
  const root = kind.endsWith('always_on')
    ? new AlwaysOnSampler()
    : kind.endsWith('always_off')
      ? new AlwaysOffSampler()
      : new TraceIdRatioBasedSampler(ratio);
  return kind.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}

/** A name for what went wrong that holds no data: a code (domain, PostgreSQL, Node) or the error's class. */
export function errorTypeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[\w.-]{1,64}$/.test(code)) return code;
  return (error as { name?: unknown } | null)?.name === undefined ? 'Error' : String((error as Error).name);
}

/**
 * The OTLP exporter, saying once that the collector cannot be reached (and once that it can again) instead of once
 * per failed batch: the batch processor drops what it cannot queue, and requests never wait for the collector.
 */
class ReportingExporter implements SpanExporter {
  private failing = false;

  constructor(
    private readonly inner: SpanExporter,
    private readonly logger: Logger,
    private readonly url: string,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        if (this.failing) this.logger.info({ collector: this.url }, 'trace export recovered');
        this.failing = false;
      } else if (!this.failing) {
        this.failing = true;
        this.logger.warn(
          { collector: this.url, error: result.error?.message },
          'trace export failed: spans are dropped until the collector answers (said once, until it recovers)',
        );
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * The batch processor's own counters (OpenTelemetry's experimental self-observability metrics) as plain numbers, for
 * Prometheus: spans exported, dropped for a full queue, failed, and the queue's length.
 */
function statsMeterProvider(capacity: number): { provider: MeterProvider; stats: ExportStats } {
  let observe: ((result: { observe(value: number): void }) => void) | undefined;
  const stats: ExportStats = {
    capacity,
    exported: 0,
    dropped: 0,
    failed: 0,
    queued() {
      let size = 0;
      observe?.({ observe: (value) => (size = value) });
      return size;
    },
  };
  const counter = {
    add(value: number, attributes?: OtelAttributes) {
      const errorType = attributes?.[ATTR_ERROR_TYPE];
      if (errorType === 'queue_full') stats.dropped += value;
      else if (errorType !== undefined) stats.failed += value;
      else stats.exported += value;
    },
  };
  const meter = Object.assign(Object.create(createNoopMeter()) as ReturnType<typeof createNoopMeter>, {
    createCounter: () => counter,
    createObservableUpDownCounter: () => ({
      addCallback: (callback: typeof observe) => (observe = callback),
      removeCallback: () => (observe = undefined),
    }),
  });
  return { provider: { getMeter: () => meter }, stats };
}

/**
 * Starts OpenTelemetry's trace SDK for this process: a tracer provider with the configured sampler and resource, a
 * batch span processor exporting OTLP over HTTP (protobuf or JSON), W3C Trace Context, and AsyncLocalStorage for the
 * active span. Returns the implementation of the tracing port (src/tracing.ts) and the exporter's counters.
 */
export function startSdk(
  config: EnabledConfig,
  logger: Logger,
  version: string,
): { tracing: Tracing; stats: ExportStats } {
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  const propagator = new W3CTraceContextPropagator();
  propagation.setGlobalPropagator(propagator);
  // The batch processor reports a failed export here too; ReportingExporter has already said what matters.
  setGlobalErrorHandler((error) => logger.debug({ error: errorTypeOf(error) }, 'OpenTelemetry reported an error'));

  const exporterOptions = { url: config.url, headers: { ...config.headers }, timeoutMillis: config.timeoutMs };
  const exporter = new ReportingExporter(
    config.protocol === 'http/json' ? new JsonExporter(exporterOptions) : new ProtobufExporter(exporterOptions),
    logger,
    config.url,
  );
  const { provider: selfObsMeterProvider, stats } = statsMeterProvider(config.batch.maxQueueSize);
  const provider = new TracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({
        [ATTR_SERVICE_VERSION]: version,
        [ATTR_SERVICE_INSTANCE_ID]: randomUUID(),
        ...config.resourceAttributes,
        [ATTR_SERVICE_NAME]: config.serviceName,
      }),
    ),
    sampler: samplerFor(config.sampler, config.ratio),
    spanProcessors: [
      new BatchSpanProcessor({
        exporter,
        maxQueueSize: config.batch.maxQueueSize,
        maxExportBatchSize: config.batch.maxExportBatchSize,
        scheduledDelayMillis: config.batch.scheduledDelayMs,
        exportTimeoutMillis: config.batch.exportTimeoutMs,
        selfObsMeterProvider,
      }),
    ],
  });
  trace.setGlobalTracerProvider(provider);
  const tracer = provider.getTracer('orders-api', version);

  const none = trace.wrapSpanContext({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 });
  const linkOf = (carrier: TraceCarrier): Link | undefined => {
    if (!TRACEPARENT.test(carrier.traceparent)) return undefined;
    const linked = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, carrier, getter));
    return linked ? { context: linked } : undefined;
  };

  /**
   * A span, or undefined when there is none to make. Under an active span that is not recorded (a trace the sampler
   * left out) a child is not made at all: every sampler offered here (OTEL_TRACES_SAMPLER) decides a local child as
   * its parent was decided, by the parent's flag or by the trace id they share, so the SDK would only hand back a
   * non-recording span, after a span id, attribute cleaning, a sampling call and a context for it. That is what a
   * request the sampler leaves out would pay for every operation, step and statement; it pays for its server span
   * only, which carries the trace (ids and the unsampled flag) to logs, error answers and the next hop.
   */
  function start(name: string, options: SpanOptions = {}): OtelSpan | undefined {
    let parent: OtelContext;
    if (options.parent) {
      parent = options.parent as unknown as OtelContext;
      if (options.requireParent && !trace.getSpan(parent)?.isRecording()) return undefined;
    } else if (options.root) {
      if (options.requireParent) return undefined;
      parent = ROOT_CONTEXT;
    } else {
      parent = context.active();
      const active = trace.getSpan(parent);
      if (active ? !active.isRecording() : options.requireParent) return undefined;
    }
    const links = options.links?.map(linkOf).filter((link): link is Link => link !== undefined);
    return tracer.startSpan(
      name,
      {
        kind: KINDS[options.kind ?? 'internal'],
        ...(options.attributes ? { attributes: options.attributes as OtelAttributes } : {}),
        ...(links?.length ? { links } : {}),
      },
      parent,
    );
  }

  const fail = (span: Span | undefined, errorType: string) => {
    if (!span) return;
    span.setStatus({ code: 2 });
    span.setAttribute(ATTR_ERROR_TYPE, errorType);
  };

  const implementation: Tracing = {
    enabled: true,
    resolverSpans: config.resolverSpans,
    start,
    with: (span, fn) => (span ? context.with(trace.setSpan(context.active(), span as OtelSpan), fn) : fn()),
    inSpan(name, options, fn) {
      const span = start(name, options);
      if (!span) return fn(undefined);
      let result;
      try {
        result = context.with(trace.setSpan(context.active(), span), fn, undefined, span);
      } catch (error) {
        fail(span, errorTypeOf(error));
        span.end();
        throw error;
      }
      if (result instanceof Promise) {
        return result.then(
          (value: unknown) => {
            span.end();
            return value;
          },
          (error: unknown) => {
            fail(span, errorTypeOf(error));
            span.end();
            throw error;
          },
        ) as typeof result;
      }
      span.end();
      return result;
    },
    bind<F extends (...args: never[]) => unknown>(fn: F): F {
      // Not context.bind: that one copies `length` onto the wrapper with defineProperty, per call, for listeners
      // (the request log's, on every request) that never read it.
      const bound = context.active();
      return function (this: unknown, ...args: Parameters<F>) {
        return context.with(bound, Reflect.apply, undefined, fn, this, args);
      } as unknown as F;
    },
    active: () => trace.getSpan(context.active()) ?? none,
    recording: () => trace.getSpan(context.active())?.isRecording() === true,
    traceId() {
      const span = trace.getSpanContext(context.active());
      return span?.traceId;
    },
    logFields(): Record<string, string> {
      const span = trace.getSpanContext(context.active());
      return span ? { trace_id: span.traceId, span_id: span.spanId } : {};
    },
    carrier() {
      const out: Record<string, string> = {};
      propagator.inject(context.active(), out, { set: (carrier, key, value) => (carrier[key] = value) });
      return out.traceparent
        ? { traceparent: out.traceparent, ...(out.tracestate ? { tracestate: out.tracestate } : {}) }
        : undefined;
    },
    inject(headers) {
      propagator.inject(context.active(), headers, { set: (carrier, key, value) => (carrier[key] = value) });
    },
    extract(input): Parent | undefined {
      const extracted = propagator.extract(ROOT_CONTEXT, input, getter);
      return trace.getSpanContext(extracted) ? (extracted as unknown as Parent) : undefined;
    },
    current: () => context.active() as unknown as Parent,
    fail,
    async shutdown() {
      await provider
        .shutdown()
        .catch((error: unknown) => logger.debug({ error: errorTypeOf(error) }, 'trace flush failed'));
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
  return { tracing: implementation, stats };
}
