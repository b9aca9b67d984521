import { collectDefaultMetrics, Counter, Gauge, Registry, type CounterConfiguration } from 'prom-client';
import { registerTracingMetrics } from './tracingMetrics.js';

/** One label set's count, kept as a plain number until the next scrape hands it to prom-client. */
export class Tally {
  pending = 0;
  constructor(readonly labels: Record<string, string>) {}
  inc(by = 1): void {
    this.pending += by;
  }
}

/**
 * A prom-client Counter whose hot label sets count in plain numbers: `tally(...)` binds a label set once, and then
 * counting is an addition, with no label object, hash string or validation per increment as prom-client's own
 * `inc` has. The sums reach the Counter when it is collected (every scrape), so /metrics shows exact values.
 */
function talliedCounter<L extends string>(config: CounterConfiguration<L>) {
  const tallies = new Map<string, Tally>();
  const counter = new Counter<L>({
    ...config,
    collect() {
      for (const t of tallies.values()) {
        if (!t.pending) continue;
        this.inc(t.labels as Partial<Record<L, string>>, t.pending);
        t.pending = 0;
      }
    },
  });
  return Object.assign(counter, {
    /** The tally of one label set (values in labelNames order), made on first use. */
    tally(...values: string[]): Tally {
      const key = values.join('\u0000');
      let t = tallies.get(key);
      if (!t) {
        const names = config.labelNames ?? [];
        if (values.length !== names.length) throw new Error(`${config.name}: ${names.length} label values expected`);
        t = new Tally(Object.fromEntries(names.map((name, i) => [name, values[i]!])));
        tallies.set(key, t);
      }
      return t;
    },
  });
}

/**
 * A histogram kept as plain numbers per label set (bucket counts, sum, count), so an observation is a few additions;
 * it hands prom-client's registry the same series a prom-client Histogram would.
 */
class TalliedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<
    string,
    { labels: Record<string, string>; buckets: number[]; sum: number; count: number }
  >();
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    private readonly bounds: readonly number[],
  ) {}

  /** The observer of one label set (values in labelNames order), made on first use. */
  child(...values: string[]): { observe(value: number): void } {
    const key = values.join('\u0000');
    let s = this.series.get(key);
    if (!s) {
      const labels = Object.fromEntries(this.labelNames.map((name, i) => [name, values[i]!]));
      s = { labels, buckets: this.bounds.map(() => 0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    const series = s;
    const bounds = this.bounds;
    return {
      observe(value: number) {
        if (!Number.isFinite(value)) return;
        for (let i = 0; i < bounds.length; i++) {
          if (value <= bounds[i]!) {
            series.buckets[i]!++;
            break;
          }
        }
        series.sum += value;
        series.count++;
      },
    };
  }

  /** What the registry renders: the shape prom-client's Histogram gives it. */
  async get() {
    const values: {
      labels: Record<string, string | number>;
      sharedLabels: Record<string, string>;
      value: number;
      metricName: string;
    }[] = [];
    for (const s of this.series.values()) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += s.buckets[i]!;
        values.push({ labels: { le }, sharedLabels: s.labels, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({
        labels: { le: '+Inf' },
        sharedLabels: s.labels,
        value: s.count,
        metricName: `${this.name}_bucket`,
      });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset() {
    this.series.clear();
  }
}

/** Why a request or stream was turned away before any work: the protections, by name. */
export type RefusalReason =
  'rate_budget' | 'query_cost' | 'query_limits' | 'stream_limit' | 'connections_per_ip' | 'request_timeout';

/**
 * How often the event-loop delay histogram behind nodejs_eventloop_lag_* samples, in ms. At prom-client's default of
 * 10 ms those wakeups were most of an idle replica's CPU (docs/operations.md#probes-metrics-and-logs); at 50 ms every
 * stall of 50 ms or longer is still caught.
 */
const EVENT_LOOP_SAMPLE_MS = 50;

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  registerTracingMetrics(registry);
  return {
    registry,
    httpRequests: talliedCounter({
      name: 'http_requests_total',
      help: 'HTTP requests by route group, method and status.',
      labelNames: ['route', 'method', 'status'] as const,
      registers: [registry],
    }),
    httpDuration: registered(
      registry,
      new TalliedHistogram(
        'http_request_duration_seconds',
        'HTTP request duration by route group.',
        ['route'],
        [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      ),
    ),
    // GraphQL reports most failures inside a 200 response, so they are counted on their own.
    graphqlErrors: new Counter({
      name: 'graphql_errors_total',
      help: 'Errors in GraphQL responses by extensions.code.',
      labelNames: ['code'] as const,
      registers: [registry],
    }),
    sqlStatements: talliedCounter({
      name: 'sql_statements_total',
      help: 'SQL statements sent to the database.',
      registers: [registry],
    }).tally(),
    graphqlOperations: talliedCounter({
      name: 'graphql_operations_total',
      help: 'GraphQL operations admitted to run, by type, on every transport.',
      labelNames: ['type'] as const,
      registers: [registry],
    }),
    subscriptionExecutions: new Counter({
      name: 'graphql_subscription_executions_total',
      help: 'Executions of subscription events: `shared` once for a whole group of subscribers, `own` per subscriber.',
      labelNames: ['sharing'] as const,
      registers: [registry],
    }),
    slowSubscribers: new Counter({
      name: 'graphql_subscribers_too_slow_total',
      help: 'Subscribers cut off because too many results waited for them (WebSocket close 1008, SSE stream ended).',
      registers: [registry],
    }),
    openSubscriptions: new Gauge({
      name: 'graphql_subscriptions_open',
      help: 'GraphQL subscriptions open on this replica (WebSocket and SSE).',
      registers: [registry],
    }),
    databaseUnreachable: new Gauge({
      name: 'database_unreachable',
      help: '1 while the database server refuses or does not answer connections: requests are answered 503 at once.',
      registers: [registry],
    }),
    refusals: new Counter({
      name: 'refusals_total',
      help: 'Requests and streams refused by a protection before any work, by reason.',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    webhookDeliveries: new Counter({
      name: 'webhook_deliveries_total',
      help: 'Webhook delivery attempts by result: success, http_error, timeout, network_error, refused_address, cancelled.',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    webhookDeliverySeconds: registered(
      registry,
      new TalliedHistogram(
        'webhook_delivery_seconds',
        'Duration of webhook delivery attempts, resolving the host included.',
        [],
        [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      ),
    ).child(),
    webhookBacklog: webhookBacklog(registry),
  };
}

/**
 * webhook_backlog: how long the oldest due message has waited, read from the queue when scraped (every replica
 * reports the same queue). `source` is set once the queue exists.
 */
function webhookBacklog(registry: Registry) {
  const holder: { source: (() => Promise<number>) | null } = { source: null };
  new Gauge({
    name: 'webhook_backlog',
    help: 'Seconds the oldest due webhook message has waited to be sent (0 when none is waiting).',
    registers: [registry],
    async collect() {
      if (!holder.source) return;
      try {
        this.set(await holder.source());
      } catch {
        // The database is away: the gauge keeps its last value, and database_unreachable says why.
      }
    },
  });
  return holder;
}

export type Metrics = ReturnType<typeof createMetrics>;

/** A metric of our own in prom-client's registry, rendered by it like its own. */
function registered<M extends { name: string }>(registry: Registry, metric: M): M {
  registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
  return metric;
}
