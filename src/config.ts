import { existsSync } from 'node:fs';
import { z } from 'zod';
import { ACR, parseAcrValues } from './domain/policy.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === '' ? undefined : v))
  .optional();

const httpUrl = (name: string) =>
  z
    .string()
    .trim()
    .refine((v) => {
      try {
        const u = new URL(v);
        return (u.protocol === 'http:' || u.protocol === 'https:') && !u.search && !u.hash;
      } catch {
        return false;
      }
    }, `${name} must be an http(s) URL without query or fragment`)
    .transform((v) => v.replace(/\/+$/, ''));

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
const milliseconds = (max: number) => z.coerce.number<string | undefined>().int().min(1).max(max);
const trueOrFalse = (name: string) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .default('false')
    .refine((v) => v === 'true' || v === 'false', `${name} must be true or false`)
    .transform((v) => v === 'true');

const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

/** OpenTelemetry's standard variables (the SDK's own environment reading is not used: this is the one check). */
const TRACING_ENV = {
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

const DRAIN_DELAY_PROBLEM = 'DRAIN_DELAY_S must be whole seconds from 0 to 300';

const EnvSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(4000),
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
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  PUBLIC_URL: httpUrl('PUBLIC_URL').optional(),
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must start with postgres:// or postgresql://')
      .optional(),
  ),
  DATABASE_SCHEMA: optionalString.pipe(
    z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'DATABASE_SCHEMA must be a lower-case SQL identifier')
      .optional(),
  ),
  DATA_DIR: z.string().trim().min(1).default('./.data'),
  REDIS_URL: optionalString.pipe(
    z
      .string()
      .regex(/^rediss?:\/\//, 'REDIS_URL must start with redis:// or rediss://')
      .optional(),
  ),
  OIDC_ISSUER: optionalString.pipe(httpUrl('OIDC_ISSUER').optional()),
  OIDC_CLIENT_ID: optionalString,
  OIDC_CLIENT_SECRET: optionalString,
  OIDC_ALLOW_HTTP: z
    .string()
    .trim()
    .default('false')
    .refine((v) => v === 'true' || v === 'false', 'OIDC_ALLOW_HTTP must be true or false')
    .transform((v) => v === 'true'),
  API_AUDIENCE: z.string().trim().min(1).default('orders-api'),
  ROLES_CLAIM: z
    .string()
    .trim()
    .regex(/^[^.\s]+(\.[^.\s]+)*$/, 'ROLES_CLAIM must be a dotted claim path such as realm_access.roles')
    .default('roles'),
  OIDC_JWKS_MAX_AGE_S: z.coerce.number().int().min(1).max(86_400).default(600),
  CORS_ORIGINS: z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    )
    .pipe(
      z.array(
        z.string().refine((o) => {
          try {
            return new URL(o).origin === o;
          } catch {
            return false;
          }
        }, 'CORS_ORIGINS must be a comma-separated list of origins such as https://app.example.com'),
      ),
    ),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  REQUEST_LOG_SAMPLE: z.coerce.number().min(0).max(1).default(0),
  RATE_LIMIT_POINTS: z.coerce.number().int().min(1).default(5000),
  RATE_LIMIT_WINDOW_S: z.coerce.number().int().min(1).default(3600),
  EVENT_POLL_MS: z.coerce.number().int().min(10).max(3_600_000).optional(),
  RESULT_CACHE: z.enum(['on', 'off']).default('off'),
  RESULT_CACHE_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(65_536)
    .max(2 ** 34)
    .default(32 * 2 ** 20),
  RESULT_CACHE_TTL_S: z.coerce.number().int().min(1).max(86_400).default(60),
  WS_IDLE_TIMEOUT_S: z.coerce.number().int().min(1).max(86_400).default(60),
  WS_INIT_TIMEOUT_S: z.coerce.number().int().min(1).max(60).default(3),
  WS_KEEPALIVE_S: z.coerce.number().int().min(1).max(3600).default(30),
  WS_MAX_PER_IP: z.coerce.number().int().min(1).default(50),
  WS_MAX_SUBSCRIPTIONS_PER_SOCKET: z.coerce.number().int().min(1).default(25),
  STREAMS_MAX_PER_USER: z.coerce.number().int().min(1).default(100),
  SSE_ANONYMOUS_MAX_PER_IP: z.coerce.number().int().min(1).default(10),
  SSE_RESERVATION_TTL_S: z.coerce.number().int().min(1).max(3600).default(30),
  LOGIN_ATTEMPTS_PER_IP: z.coerce.number().int().min(1).max(10_000).default(50),
  SWEEP_INTERVAL_S: z.coerce.number().int().min(1).max(86_400).default(300),
  SIGNIN_LOCK_S: z.coerce.number().int().min(1).max(86_400).default(900),
  STEP_UP_ACR: z
    .string()
    .trim()
    .default(ACR.mfa)
    .transform((v) => (v === '' ? ACR.mfa : v))
    .refine(
      (v) => v === 'off' || parseAcrValues(v) !== null,
      'STEP_UP_ACR must be off or up to 10 space-separated acr values of visible ASCII without quotes or backslashes',
    )
    .transform((v) => (v === 'off' ? null : parseAcrValues(v)!)),
  STEP_UP_MAX_AGE_S: z.coerce.number().int().min(1).max(86_400).default(900),
  DRAIN_DELAY_S: optionalString.pipe(
    z.coerce
      .number<string | undefined>({ error: DRAIN_DELAY_PROBLEM })
      .int(DRAIN_DELAY_PROBLEM)
      .min(0, DRAIN_DELAY_PROBLEM)
      .max(300, DRAIN_DELAY_PROBLEM)
      .optional(),
  ),
  REQUEST_TIMEOUT_S: z.coerce.number().int().min(1).max(3600).default(30),
  BODY_IDLE_TIMEOUT_S: z.coerce.number().int().min(1).max(3600).default(10),
  HTTP_MAX_CONNECTIONS_PER_IP: z.coerce.number().int().min(1).max(1_000_000).default(256),
  MAX_QUERY_DEPTH: z.coerce.number().int().min(1).max(100).default(12),
  MAX_ALIASES: z.coerce.number().int().min(0).max(1000).default(15),
  MAX_DIRECTIVES: z.coerce.number().int().min(0).max(1000).default(50),
  MAX_TOKENS: z.coerce.number().int().min(100).max(100_000).default(1000),
  MAX_QUERY_COST: z.coerce.number().int().min(1).default(10000),
  MAX_SUBSCRIPTION_COST: z.coerce.number().int().min(1).default(200),
  MAX_MUTATIONS: z.coerce.number().int().min(1).max(1000).default(10),
  PERSISTED_DOCUMENTS: optionalString.pipe(
    z
      .string()
      .refine((p) => existsSync(p), 'PERSISTED_DOCUMENTS must name an existing manifest.json')
      .optional(),
  ),
  APQ_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(8 * 1024),
  APQ_MAX_ENTRIES: z.coerce.number().int().min(0).default(2000),
  SCIM_TOKEN: optionalString.pipe(
    z
      .string()
      .min(32, 'SCIM_TOKEN must be at least 32 characters (a random secret, e.g. openssl rand -base64 32)')
      .max(512, 'SCIM_TOKEN must be at most 512 characters')
      .regex(/^[A-Za-z0-9\-._~+/]+=*$/, 'SCIM_TOKEN must be a token68 (letters, digits and -._~+/ then optional =)')
      .optional(),
  ),
  SCIM_SCOPE: optionalString.pipe(
    z
      .string()
      .regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'SCIM_SCOPE must be one OAuth scope (no spaces or quotes), or off')
      .optional(),
  ),
  SCIM_LINK_CLAIM: z
    .string()
    .trim()
    .regex(/^[^.\s]+(\.[^.\s]+)*$/, 'SCIM_LINK_CLAIM must be a dotted claim path such as sub, oid or email')
    .default('sub'),
  SCIM_STAFF_GROUP: z.string().trim().min(1).max(256).default('staff'),
  TRUST_PROXY: z
    .string()
    .trim()
    .default('false')
    .refine((v) => /^(true|false|\d{1,2})$/.test(v), 'TRUST_PROXY must be true, false or a hop count')
    .transform((v) => (v === 'true' ? true : v === 'false' ? false : Number(v))),
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  WEBHOOK_RETRY_SCHEDULE_S: z
    .string()
    .trim()
    .default('0,5,300,1800,7200,18000,36000,36000')
    .refine(
      (v) => /^\d{1,6}(,\d{1,6}){0,19}$/.test(v.replace(/\s+/g, '')),
      'WEBHOOK_RETRY_SCHEDULE_S must be 1 to 20 comma-separated whole seconds (each at most 999999)',
    )
    .transform((v) => v.replace(/\s+/g, '').split(',').map(Number)),
  WEBHOOK_ALLOW_PRIVATE_URLS: trueOrFalse('WEBHOOK_ALLOW_PRIVATE_URLS'),
  WEBHOOK_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(1000),
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(0).max(1000).default(32),
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(4),
  WEBHOOK_OWNER_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(8),
  WEBHOOK_DISABLE_AFTER_S: z.coerce.number().int().min(1).max(31_536_000).default(432_000),
  ...TRACING_ENV,
});

/**
 * Rules between settings. They read the raw strings, so they are reported even when some
 * single setting is malformed: zod would skip an object-level refinement in that case.
 */
function crossFieldProblems(env: NodeJS.ProcessEnv, opts: LoadConfigOptions): string[] {
  const set = (name: string) => Boolean(env[name]?.trim());
  const problems: string[] = [];
  if (env.NODE_ENV?.trim() === 'production') {
    if (!set('OIDC_ISSUER'))
      problems.push('OIDC_ISSUER: is required in production (the embedded identity provider is for development only)');
    if (!set('DATABASE_URL') && !opts.databaseHandedIn)
      problems.push('DATABASE_URL: is required in production (the embedded database is for development only)');
    // openid-client refuses plain-HTTP issuers unless told; production says so at start, not at the first sign-in.
    if (
      set('OIDC_CLIENT_ID') &&
      /^http:/i.test(env.OIDC_ISSUER?.trim() ?? '') &&
      env.OIDC_ALLOW_HTTP?.trim() !== 'true'
    )
      problems.push(
        'OIDC_ISSUER: browser sign-in needs an https issuer in production; set OIDC_ALLOW_HTTP=true only for an issuer reached over a private network',
      );
  }
  if (!set('OIDC_ISSUER') && (set('OIDC_CLIENT_ID') || set('OIDC_CLIENT_SECRET')))
    problems.push('OIDC_CLIENT_ID: OIDC_CLIENT_ID/OIDC_CLIENT_SECRET have no meaning without OIDC_ISSUER');
  if (set('OIDC_CLIENT_SECRET') && !set('OIDC_CLIENT_ID'))
    problems.push('OIDC_CLIENT_SECRET: is set but OIDC_CLIENT_ID is not');
  const port = env.PORT?.trim() || '4000';
  if (env.METRICS_PORT?.trim() === port && port !== '0')
    problems.push('METRICS_PORT: must differ from PORT (metrics are never served on the public port)');
  // Compared only when both are valid: a malformed one is reported on its own.
  const seconds = (name: string, fallback: number) => {
    const value = set(name) ? Number(env[name]) : fallback;
    return Number.isInteger(value) && value >= 1 ? value : NaN;
  };
  if (seconds('BODY_IDLE_TIMEOUT_S', 10) > seconds('REQUEST_TIMEOUT_S', 30))
    problems.push('BODY_IDLE_TIMEOUT_S: must not exceed REQUEST_TIMEOUT_S (a request is cut at that time anyway)');
  if (set('DATABASE_SCHEMA') && !set('DATABASE_URL'))
    problems.push('DATABASE_SCHEMA: only applies together with DATABASE_URL');
  const batch = Number(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE?.trim() || 512);
  const queue = Number(env.OTEL_BSP_MAX_QUEUE_SIZE?.trim() || 2048);
  if (batch > queue) problems.push('OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must not exceed OTEL_BSP_MAX_QUEUE_SIZE');
  return problems;
}

export type LogLevel = (typeof LOG_LEVELS)[number];

export type DatabaseConfig =
  | { readonly kind: 'postgres'; readonly url: string; readonly schema?: string }
  | { readonly kind: 'pglite'; readonly dataDir: string | 'memory' };

export interface Config {
  readonly nodeEnv: 'development' | 'test' | 'production';
  readonly isProduction: boolean;
  readonly port: number;
  readonly host: string;
  /** Where GET /metrics is served, on the same host but never on the public port; 0 picks one, null is off. */
  readonly metricsPort: number | null;
  /** Externally visible base URL, no trailing slash. */
  readonly publicUrl: string;
  readonly database: DatabaseConfig;
  readonly redisUrl?: string;
  readonly oidc: {
    /** Unset means the embedded development identity provider at `${publicUrl}/idp`. */
    readonly issuer?: string;
    readonly clientId?: string;
    readonly clientSecret?: string;
    readonly audience: string;
    readonly rolesClaim: string;
    /**
     * An external issuer's JWKS is fetched again once it is this old (and at most this often for an unknown key id):
     * the longest a key removed from the issuer's JWKS still validates tokens this replica has already verified.
     */
    readonly jwksMaxAgeSeconds: number;
    /** A plain-HTTP issuer is allowed in production (compose's Keycloak on the private network, tests). */
    readonly allowHttp: boolean;
  };
  readonly corsOrigins: readonly string[];
  readonly logLevel: LogLevel;
  /** Share (0–1) of successful requests whose `request completed` line is logged at info; the rest go to debug. */
  readonly requestLogSample: number;
  readonly trustProxy: boolean | number;
  /**
   * On SIGTERM, how long /readyz says 503 while everything is still served, so that the balancer stops
   * sending before the socket closes. 5 in production, 0 elsewhere (tests and `npm start` stop at once).
   */
  readonly drainDelaySeconds: number;
  /** Bounds of the HTTP server itself, below every route: time to receive a request, connections per address. */
  readonly httpServer: {
    /** A request (headers and body) must have arrived within this time; it is cut with 408 otherwise. */
    readonly requestTimeoutSeconds: number;
    /** A request body that sends nothing for this long is cut with 408. */
    readonly bodyIdleTimeoutSeconds: number;
    /** Connections one peer address may hold on this replica; the next is answered 503 and closed. */
    readonly maxConnectionsPerIp: number;
  };
  /** One budget of points per client per window, spent by GraphQL cost and REST prices. */
  readonly rateLimit: { readonly points: number; readonly windowSeconds: number };
  /** How often each replica reads the event outbox for what Redis did not bring (or, without Redis, everything). */
  readonly eventPollMs: number;
  /** The GraphQL result cache (RESULT_CACHE=on): query responses in memory, flushed by order events. */
  readonly resultCache:
    | { readonly enabled: false }
    | { readonly enabled: true; readonly maxBytes: number; readonly ttlSeconds: number; readonly maxKeyBytes: number };
  /** Bounds on long-lived connections (WebSocket and SSE); counts are per replica. */
  readonly streams: StreamLimits;
  /** Sign-ins in progress kept per client IP; the oldest gives way. */
  readonly loginAttemptsPerIp: number;
  /** How often one replica deletes expired rows (idempotency keys, sessions, sign-ins, old events). */
  readonly sweepIntervalSeconds: number;
  /** How long repeated sign-in failures lock a username or address at the embedded IdP. */
  readonly signin: { readonly lockSeconds: number };
  /** OpenTelemetry tracing: off unless an OTLP endpoint is configured (then the SDK is loaded, and only then). */
  readonly tracing: TracingConfig;
  /**
   * SCIM 2.0 provisioning at /scim/v2. Off (404) unless the directory can authenticate: with the shared secret
   * `token`, or with an access token from the issuer that carries `scope`.
   */
  readonly scim: {
    readonly enabled: boolean;
    readonly token?: string;
    readonly scope?: string;
    /** The token claim whose value a directory user's externalId is (SCIM_LINK_CLAIM). */
    readonly linkClaim: string;
    /** The group whose members are staff, when the directory sends it (SCIM_STAFF_GROUP). */
    readonly staffGroup: string;
  };
  /**
   * RFC 9470 step-up for the staff role's writes: an `acr` among `acrValues` and an `auth_time` at most
   * `maxAgeSeconds` old (STEP_UP_ACR, STEP_UP_MAX_AGE_S). Null with STEP_UP_ACR=off.
   */
  readonly stepUp: { readonly acrValues: readonly string[]; readonly maxAgeSeconds: number } | null;
  /** Webhook delivery (docs/webhooks.md). */
  readonly webhooks: {
    /** One attempt, resolving the host included, is cut after this long. */
    readonly timeoutMs: number;
    /** The delay before each attempt, in seconds; a message gets as many attempts as there are entries. */
    readonly retryScheduleSeconds: readonly number[];
    /** http and loopback/private targets admitted: development, tests, compose's internal network. */
    readonly allowPrivateUrls: boolean;
    /** How often each replica looks for due messages (new events also wake it). */
    readonly pollMs: number;
    /** Attempts in flight per replica (0: this replica sends none), to one endpoint and for one owner per replica. */
    readonly concurrency: number;
    readonly endpointConcurrency: number;
    readonly ownerConcurrency: number;
    /** An endpoint failing continuously for this long is disabled. */
    readonly disableAfterSeconds: number;
  };
  /** Static limits and the cost ceiling every GraphQL document meets before anything runs, on every transport. */
  readonly graphql: {
    readonly maxDepth: number;
    readonly maxAliases: number;
    readonly maxDirectives: number;
    readonly maxTokens: number;
    readonly maxCost: number;
    /** A subscription runs again for every event it is sent, so its document gets a ceiling of its own. */
    readonly maxSubscriptionCost: number;
    readonly maxMutations: number;
    /** A graphql-codegen persisted-documents manifest: when set, production runs only these documents. */
    readonly persistedDocuments?: string;
    /** Automatic persisted queries: larger documents are not registered, and at most this many are kept. */
    readonly apq: { readonly maxBytes: number; readonly maxEntries: number };
  };
}

export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

export type TracingConfig =
  | { readonly enabled: false }
  | {
      readonly enabled: true;
      /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
      readonly url: string;
      readonly protocol: 'http/protobuf' | 'http/json';
      /** Sent with every export (an API key, say); never logged. */
      readonly headers: Readonly<Record<string, string>>;
      readonly timeoutMs: number;
      readonly serviceName: string;
      readonly resourceAttributes: Readonly<Record<string, string>>;
      readonly sampler: TraceSampler;
      /** The traceidratio samplers' ratio (OTEL_TRACES_SAMPLER_ARG, 1 when unset). */
      readonly ratio: number;
      readonly batch: {
        readonly scheduledDelayMs: number;
        readonly exportTimeoutMs: number;
        readonly maxQueueSize: number;
        readonly maxExportBatchSize: number;
      };
      /** OTEL_GRAPHQL_RESOLVER_SPANS: a span per resolved field, for debugging; off by default (it costs). */
      readonly resolverSpans: boolean;
    };

export interface StreamLimits {
  /** An initialised WebSocket holding no subscription closes after this long. */
  readonly wsIdleTimeoutSeconds: number;
  /** A WebSocket that has not sent connection_init by then closes (graphql-ws: 4408). */
  readonly wsInitTimeoutSeconds: number;
  /**
   * Every WebSocket is pinged this often (30 s by default, by one timer for all connections); one that has not
   * answered by the next ping is dropped.
   */
  readonly wsKeepAliveSeconds: number;
  readonly wsMaxPerIp: number;
  readonly wsMaxSubscriptionsPerSocket: number;
  /** WebSocket subscriptions and SSE streams of one user together. */
  readonly maxPerUser: number;
  readonly sseAnonymousMaxPerIp: number;
  /** A single-connection SSE reservation not connected within this time is dropped. */
  readonly sseReservationTtlSeconds: number;
}

export interface LoadConfigOptions {
  /**
   * The caller hands an already open database to startServer (a test's second instance over the first's
   * embedded one), so production's demand for DATABASE_URL does not apply. Deliberately not an env var.
   */
  readonly databaseHandedIn?: boolean;
}

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Validates the whole environment at once so that every problem is reported together. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, opts: LoadConfigOptions = {}): Config {
  const parsed = EnvSchema.safeParse(env);
  const problems = [
    ...(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.') || 'environment'}: ${i.message}`)),
    ...crossFieldProblems(env, opts),
  ];
  if (!parsed.success || problems.length) throw new ConfigError(problems);
  const e = parsed.data;
  const config: Config = {
    nodeEnv: e.NODE_ENV,
    isProduction: e.NODE_ENV === 'production',
    port: e.PORT,
    host: e.HOST,
    // Test servers run many to a process: each takes a free port unless told otherwise.
    metricsPort: e.METRICS_PORT === undefined ? (e.NODE_ENV === 'test' ? 0 : 9464) : e.METRICS_PORT,
    publicUrl: e.PUBLIC_URL ?? `http://localhost:${e.PORT}`,
    database: e.DATABASE_URL
      ? { kind: 'postgres', url: e.DATABASE_URL, ...(e.DATABASE_SCHEMA ? { schema: e.DATABASE_SCHEMA } : {}) }
      : { kind: 'pglite', dataDir: e.DATA_DIR },
    ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL } : {}),
    oidc: {
      ...(e.OIDC_ISSUER ? { issuer: e.OIDC_ISSUER } : {}),
      ...(e.OIDC_CLIENT_ID ? { clientId: e.OIDC_CLIENT_ID } : {}),
      ...(e.OIDC_CLIENT_SECRET ? { clientSecret: e.OIDC_CLIENT_SECRET } : {}),
      audience: e.API_AUDIENCE,
      rolesClaim: e.ROLES_CLAIM,
      jwksMaxAgeSeconds: e.OIDC_JWKS_MAX_AGE_S,
      allowHttp: e.OIDC_ALLOW_HTTP,
    },
    corsOrigins: e.CORS_ORIGINS,
    logLevel: e.LOG_LEVEL,
    requestLogSample: e.REQUEST_LOG_SAMPLE,
    trustProxy: e.TRUST_PROXY,
    drainDelaySeconds: e.DRAIN_DELAY_S ?? (e.NODE_ENV === 'production' ? 5 : 0),
    httpServer: {
      requestTimeoutSeconds: e.REQUEST_TIMEOUT_S,
      bodyIdleTimeoutSeconds: e.BODY_IDLE_TIMEOUT_S,
      maxConnectionsPerIp: e.HTTP_MAX_CONNECTIONS_PER_IP,
    },
    rateLimit: { points: e.RATE_LIMIT_POINTS, windowSeconds: e.RATE_LIMIT_WINDOW_S },
    // Tests run replicas without Redis, where the poll is the only path between them: they should not wait 5 s.
    eventPollMs: e.EVENT_POLL_MS ?? (e.NODE_ENV === 'test' ? 200 : 5000),
    resultCache:
      e.RESULT_CACHE === 'on'
        ? { enabled: true, maxBytes: e.RESULT_CACHE_MAX_BYTES, ttlSeconds: e.RESULT_CACHE_TTL_S, maxKeyBytes: 4096 }
        : { enabled: false },
    streams: {
      wsIdleTimeoutSeconds: e.WS_IDLE_TIMEOUT_S,
      wsInitTimeoutSeconds: e.WS_INIT_TIMEOUT_S,
      wsKeepAliveSeconds: e.WS_KEEPALIVE_S,
      wsMaxPerIp: e.WS_MAX_PER_IP,
      wsMaxSubscriptionsPerSocket: e.WS_MAX_SUBSCRIPTIONS_PER_SOCKET,
      maxPerUser: e.STREAMS_MAX_PER_USER,
      sseAnonymousMaxPerIp: e.SSE_ANONYMOUS_MAX_PER_IP,
      sseReservationTtlSeconds: e.SSE_RESERVATION_TTL_S,
    },
    loginAttemptsPerIp: e.LOGIN_ATTEMPTS_PER_IP,
    sweepIntervalSeconds: e.SWEEP_INTERVAL_S,
    signin: { lockSeconds: e.SIGNIN_LOCK_S },
    tracing: tracingConfig(e),
    scim: scimConfig(e),
    stepUp: e.STEP_UP_ACR ? { acrValues: e.STEP_UP_ACR, maxAgeSeconds: e.STEP_UP_MAX_AGE_S } : null,
    webhooks: {
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      retryScheduleSeconds: e.WEBHOOK_RETRY_SCHEDULE_S,
      allowPrivateUrls: e.WEBHOOK_ALLOW_PRIVATE_URLS,
      pollMs: e.WEBHOOK_POLL_MS,
      concurrency: e.WEBHOOK_CONCURRENCY,
      endpointConcurrency: e.WEBHOOK_ENDPOINT_CONCURRENCY,
      ownerConcurrency: e.WEBHOOK_OWNER_CONCURRENCY,
      disableAfterSeconds: e.WEBHOOK_DISABLE_AFTER_S,
    },
    graphql: {
      maxDepth: e.MAX_QUERY_DEPTH,
      maxAliases: e.MAX_ALIASES,
      maxDirectives: e.MAX_DIRECTIVES,
      maxTokens: e.MAX_TOKENS,
      maxCost: e.MAX_QUERY_COST,
      maxSubscriptionCost: e.MAX_SUBSCRIPTION_COST,
      maxMutations: e.MAX_MUTATIONS,
      ...(e.PERSISTED_DOCUMENTS ? { persistedDocuments: e.PERSISTED_DOCUMENTS } : {}),
      apq: { maxBytes: e.APQ_MAX_BYTES, maxEntries: e.APQ_MAX_ENTRIES },
    },
  };
  return deepFreeze(config);
}

/** Tracing is on when an OTLP endpoint is set, unless OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. */
function tracingConfig(e: z.infer<typeof EnvSchema>): TracingConfig {
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  const url = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base ? `${base}/v1/traces` : undefined);
  if (!url || e.OTEL_SDK_DISABLED || e.OTEL_TRACES_EXPORTER === 'none') return { enabled: false };
  return {
    enabled: true,
    url,
    protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
    headers: { ...e.OTEL_EXPORTER_OTLP_HEADERS, ...e.OTEL_EXPORTER_OTLP_TRACES_HEADERS },
    timeoutMs: e.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? e.OTEL_EXPORTER_OTLP_TIMEOUT ?? 10_000,
    serviceName: e.OTEL_SERVICE_NAME,
    resourceAttributes: e.OTEL_RESOURCE_ATTRIBUTES,
    sampler: e.OTEL_TRACES_SAMPLER,
    ratio: e.OTEL_TRACES_SAMPLER_ARG ?? 1,
    batch: {
      scheduledDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
      exportTimeoutMs: e.OTEL_BSP_EXPORT_TIMEOUT,
      maxQueueSize: e.OTEL_BSP_MAX_QUEUE_SIZE,
      maxExportBatchSize: e.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
    },
    resolverSpans: e.OTEL_GRAPHQL_RESOLVER_SPANS,
  };
}

/**
 * SCIM_SCOPE defaults to `scim` with the embedded IdP (development: its `directory` client gets that scope by the
 * client-credentials grant) and to off with any other issuer, so production turns SCIM on only when told.
 */
function scimConfig(e: z.infer<typeof EnvSchema>): Config['scim'] {
  const scope = e.SCIM_SCOPE === 'off' ? undefined : (e.SCIM_SCOPE ?? (e.OIDC_ISSUER ? undefined : 'scim'));
  return {
    enabled: Boolean(e.SCIM_TOKEN || scope),
    ...(e.SCIM_TOKEN ? { token: e.SCIM_TOKEN } : {}),
    ...(scope ? { scope } : {}),
    linkClaim: e.SCIM_LINK_CLAIM,
    staffGroup: e.SCIM_STAFF_GROUP,
  };
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
