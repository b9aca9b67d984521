import { z } from 'zod';
import type { Concern } from './values.js';

const env = {
  WS_IDLE_TIMEOUT_S: z.coerce.number().int().min(1).max(86_400).default(60),
  WS_INIT_TIMEOUT_S: z.coerce.number().int().min(1).max(60).default(3),
  WS_KEEPALIVE_S: z.coerce.number().int().min(1).max(3600).default(30),
  WS_MAX_PER_IP: z.coerce.number().int().min(1).default(50),
  WS_MAX_SUBSCRIPTIONS_PER_SOCKET: z.coerce.number().int().min(1).default(25),
  STREAMS_MAX_PER_USER: z.coerce.number().int().min(1).default(100),
  STREAMS_MAX_PER_REPLICA: z.coerce.number().int().min(1).default(10_000),
  SSE_ANONYMOUS_MAX_PER_IP: z.coerce.number().int().min(1).default(10),
  SSE_RESERVATION_TTL_S: z.coerce.number().int().min(1).max(3600).default(30),
};

/** Bounds on long-lived connections (WebSocket and SSE); counts are per replica. */
export const streams = {
  model: z.object(env).transform((e) => ({
    streams: {
      /** An initialised WebSocket holding no subscription closes after this long. */
      wsIdleTimeoutSeconds: e.WS_IDLE_TIMEOUT_S,
      /** A WebSocket that has not sent connection_init by then closes (graphql-ws: 4408). */
      wsInitTimeoutSeconds: e.WS_INIT_TIMEOUT_S,
      /**
       * Every WebSocket is pinged this often (by one timer for all connections); one that has not answered by the
       * next ping is dropped.
       */
      wsKeepAliveSeconds: e.WS_KEEPALIVE_S,
      wsMaxPerIp: e.WS_MAX_PER_IP,
      wsMaxSubscriptionsPerSocket: e.WS_MAX_SUBSCRIPTIONS_PER_SOCKET,
      /** WebSocket subscriptions and SSE streams of one user together. */
      maxPerUser: e.STREAMS_MAX_PER_USER,
      /**
       * WebSockets and SSE streams this replica holds, all clients together: past it a new WebSocket is closed with
       * 1013 (try again later) and a new SSE stream answered 503 with Retry-After; ordinary requests go on.
       */
      maxPerReplica: e.STREAMS_MAX_PER_REPLICA,
      sseAnonymousMaxPerIp: e.SSE_ANONYMOUS_MAX_PER_IP,
      /** A single-connection SSE reservation not connected within this time is dropped. */
      sseReservationTtlSeconds: e.SSE_RESERVATION_TTL_S,
    },
  })),
} satisfies Concern<z.ZodType>;
