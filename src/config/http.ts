import proxyaddr from 'proxy-addr';
import { z } from 'zod';
import { httpUrl, notAbove, optionalString, type Concern } from './values.js';

export const NODE_ENV = z.enum(['development', 'test', 'production']).default('development');
/** NODE_ENV as another concern reads it: a malformed one is reported once, here. */
export const nodeEnvOf = NODE_ENV.catch('development');

const TRUST_PROXY_PROBLEM =
  'TRUST_PROXY must be true, false, a hop count, or addresses and subnets (comma-separated; loopback, linklocal ' +
  'and uniquelocal name their ranges)';
const addressList = (v: string) => v.split(',').map((a) => a.trim());
/** proxy-addr (Express's `trust proxy`) is what reads the list: one it cannot compile is refused here. */
function compiles(list: string[]): boolean {
  try {
    proxyaddr.compile(list);
    return true;
  } catch {
    return false;
  }
}

const DRAIN_DELAY_PROBLEM = 'DRAIN_DELAY_S must be whole seconds from 0 to 300';

const env = {
  NODE_ENV,
  PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  PUBLIC_URL: httpUrl('PUBLIC_URL').optional(),
  TRUST_PROXY: z
    .string()
    .trim()
    .default('false')
    .refine((v) => /^(true|false|\d{1,2})$/.test(v) || compiles(addressList(v)), TRUST_PROXY_PROBLEM)
    .transform((v): boolean | number | string[] =>
      v === 'true' ? true : v === 'false' ? false : /^\d+$/.test(v) ? Number(v) : addressList(v),
    ),
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
  HTTP_MAX_PROXY_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(16_384),
  RATE_LIMIT_POINTS: z.coerce.number().int().min(1).default(5000),
  RATE_LIMIT_WINDOW_S: z.coerce.number().int().min(1).default(3600),
};
export const HTTP_ENV = env;

/** The HTTP server: where it listens, how it is reached, its own bounds below every route, the rate budget. */
export const http = {
  model: z.object(env).transform((e) => ({
    nodeEnv: e.NODE_ENV,
    isProduction: e.NODE_ENV === 'production',
    port: e.PORT,
    host: e.HOST,
    /** Externally visible base URL, no trailing slash. */
    publicUrl: e.PUBLIC_URL ?? `http://localhost:${e.PORT}`,
    /**
     * Which peers are proxies whose X-Forwarded-For names the client: all (true), the nearest N hops, or those
     * addresses and subnets. Per-client limits count that client; a trusted proxy's own connections are bounded by
     * `httpServer.maxProxyConnections` instead of the per-address cap.
     */
    trustProxy: e.TRUST_PROXY,
    /**
     * On SIGTERM, how long /readyz says 503 while everything is still served, so that the balancer stops
     * sending before the socket closes. 5 in production, 0 elsewhere (tests and `npm start` stop at once).
     */
    drainDelaySeconds: e.DRAIN_DELAY_S ?? (e.NODE_ENV === 'production' ? 5 : 0),
    /** Bounds of the HTTP server itself, below every route: time to receive a request, connections per address. */
    httpServer: {
      /** A request (headers and body) must have arrived within this time; it is cut with 408 otherwise. */
      requestTimeoutSeconds: e.REQUEST_TIMEOUT_S,
      /** A request body that sends nothing for this long is cut with 408. */
      bodyIdleTimeoutSeconds: e.BODY_IDLE_TIMEOUT_S,
      /**
       * Connections one untrusted peer address may hold on this replica; at it, its oldest idle keep-alive
       * connection is closed for a new one, and with none idle the new one is answered 503 and closed.
       */
      maxConnectionsPerIp: e.HTTP_MAX_CONNECTIONS_PER_IP,
      /** Connections all trusted proxies together may hold on this replica (one budget, same rule at it). */
      maxProxyConnections: e.HTTP_MAX_PROXY_CONNECTIONS,
    },
    /** One budget of points per client per window, spent by GraphQL cost and REST prices. */
    rateLimit: { points: e.RATE_LIMIT_POINTS, windowSeconds: e.RATE_LIMIT_WINDOW_S },
  })),
  rules: (raw) =>
    notAbove(
      raw,
      ['BODY_IDLE_TIMEOUT_S', env.BODY_IDLE_TIMEOUT_S],
      ['REQUEST_TIMEOUT_S', env.REQUEST_TIMEOUT_S],
      ' (a request is cut at that time anyway)',
    ),
} satisfies Concern<z.ZodType>;
