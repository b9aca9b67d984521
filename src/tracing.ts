/**
 * The tracing port: what every layer (store, http, realtime) calls to make spans, read the current trace and carry it
 * across a hop. It imports nothing from OpenTelemetry, so with tracing off (no OTLP endpoint) no OpenTelemetry module
 * is ever loaded and each call is a no-op that returns at once. `http/observability/tracing.ts` loads the SDK when the
 * configuration asks for it and installs its implementation here, as OpenTelemetry's own API does with a registered
 * SDK; the shape of `Span` is the subset of OpenTelemetry's that this code uses, so the SDK's spans serve as they are.
 */

export type AttributeValue = string | number | boolean | readonly string[];
export type Attributes = Readonly<Record<string, AttributeValue | undefined>>;

/** W3C Trace Context, as it crosses a hop that has no headers (the outbox, a Redis message, `connection_init`). */
export interface TraceCarrier {
  readonly traceparent: string;
  readonly tracestate?: string;
}

/** OpenTelemetry's span, as far as this code uses it. */
export interface Span {
  setAttribute(key: string, value: AttributeValue): unknown;
  setAttributes(attributes: Attributes): unknown;
  updateName(name: string): unknown;
  /** Status ERROR; `code` 2 is OpenTelemetry's SpanStatusCode.ERROR. */
  setStatus(status: { code: 2; message?: string }): unknown;
  isRecording(): boolean;
  end(): void;
}

export type SpanKind = 'internal' | 'server' | 'client' | 'producer' | 'consumer';

/** Where a span hangs: an extracted remote context (opaque), or nothing for the active span. */
export interface Parent {
  readonly __parent: unique symbol;
}

export interface SpanOptions {
  readonly kind?: SpanKind;
  readonly attributes?: Attributes;
  /** Other traces this span continues (an event's writer). */
  readonly links?: readonly TraceCarrier[];
  /** A new trace, whatever is active (unless `parent` is given). */
  readonly root?: boolean;
  /**
   * The span's parent instead of the active span (undefined: see `root`). Without `parent` or `root`, a span asked for
   * under an active span that is not recorded (a trace the sampler left out) is not made: `start` returns undefined.
   */
  readonly parent?: Parent;
  /** Only when some span is active (statements and commands outside a request are not traced). */
  readonly requireParent?: boolean;
}

/** Header-like input: Node's IncomingHttpHeaders, or a `connection_init` payload. */
export type CarrierInput = Readonly<Record<string, unknown>>;

export interface Tracing {
  /** Whether spans are being made; false means every other member is a no-op. */
  readonly enabled: boolean;
  /** OTEL_GRAPHQL_RESOLVER_SPANS: a span per resolved field. */
  readonly resolverSpans: boolean;
  /** Starts a span (a child of the active one unless told otherwise); undefined when `requireParent` finds none. */
  start(name: string, options?: SpanOptions): Span | undefined;
  /** Runs `fn` with `span` active, so that spans started inside (across awaits) are its children. */
  with<T>(span: Span | undefined, fn: () => T): T;
  /** start + with, ending the span when `fn` returns or its promise settles; a throw marks the span as failed. */
  inSpan<T>(name: string, options: SpanOptions, fn: (span: Span | undefined) => T): T;
  /** `fn` bound to the current context: an event listener registered now runs in it later. */
  bind<F extends (...args: never[]) => unknown>(fn: F): F;
  /** The active span (a no-op span when none is). */
  active(): Span;
  /**
   * Whether the active span is recorded: false with tracing off, outside any span, and in a trace the sampler left
   * out. A child of a span that is not recorded is never recorded either, so a caller that finds false skips all its
   * work (attributes, a sanitized statement): `start` would make no span.
   */
  recording(): boolean;
  /** The active trace's id, for error answers; undefined when none is active. */
  traceId(): string | undefined;
  /** `{ trace_id, span_id }` of the active span, for log lines (pino's mixin). */
  logFields(): Record<string, string>;
  /** The active context as W3C Trace Context, for a hop without headers. */
  carrier(): TraceCarrier | undefined;
  /** Sets `traceparent` (and `tracestate`) on outgoing headers from the active context. */
  inject(headers: Record<string, string>): void;
  /** A remote parent from `traceparent`/`tracestate` in headers or a payload; undefined when they are absent or bad. */
  extract(input: CarrierInput): Parent | undefined;
  /** The active context, to hang later spans from (a connection's operations from its handshake). */
  current(): Parent | undefined;
  /** Marks a span as failed, with `error.type` (a code or class name, never a message that could hold data). */
  fail(span: Span | undefined, errorType: string): void;
  /** Exports what is queued and stops (the process is exiting). */
  shutdown(): Promise<void>;
}

const NOOP_SPAN: Span = {
  setAttribute: () => undefined,
  setAttributes: () => undefined,
  updateName: () => undefined,
  setStatus: () => undefined,
  isRecording: () => false,
  end: () => undefined,
};

/** Tracing off: nothing is recorded, nothing is carried, and nothing is loaded. */
export const NOOP_TRACING: Tracing = Object.freeze({
  enabled: false,
  resolverSpans: false,
  start: () => undefined,
  with: <T>(_span: Span | undefined, fn: () => T) => fn(),
  inSpan: <T>(_name: string, _options: SpanOptions, fn: (span: Span | undefined) => T) => fn(undefined),
  bind: <F>(fn: F) => fn,
  active: () => NOOP_SPAN,
  recording: () => false,
  traceId: () => undefined,
  // A fresh object: pino merges a line's own fields into what the mixin returns.
  logFields: () => ({}),
  carrier: () => undefined,
  inject: () => undefined,
  extract: () => undefined,
  current: () => undefined,
  fail: () => undefined,
  shutdown: async () => undefined,
});

/** The tracing in force in this process: read it at call time (`tracing.enabled`), never keep a member. */
export let tracing: Tracing = NOOP_TRACING;

/** Installs the SDK's implementation (or NOOP_TRACING again once it has shut down). */
export function installTracing(implementation: Tracing): void {
  tracing = implementation;
}

/** A W3C `traceparent` value: version 00, a trace id and a span id that are not all zeros, and flags. */
export const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;
