import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Auth } from '../../auth/index.js';
import type { Config } from '../../config/index.js';
import type { User } from '../../domain/policy.js';
import type { Services } from '../../domain/services.js';
import { proxyTrust } from '../middleware/index.js';
import type { Metrics } from '../observability/index.js';
import type { Pipeline } from '../pipeline/index.js';
import { createSharedExecution } from './sharedExecution.js';
import { createSseRouter } from './sse.js';
import { createStreamRegistry, endingStreamsOnRevoke } from './streamRegistry.js';
import { createSubscribePath } from './subscribe.js';
import { createWebSocketServer } from './webSocketServer.js';

/**
 * Subscriptions, assembled: the registry of open streams (bounds per address and per user, the sessions and the
 * directory's verdicts behind them), the shared execution, the one subscribe path, and the two transports over it.
 */
export function createRealtime(deps: {
  config: Pick<Config, 'streams' | 'trustProxy'>;
  /** The shared database's identity names the stream channels, so other deployments' replicas are never heard. */
  db: { readonly identity: string };
  redis?: Redis;
  logger: Logger;
  metrics: Metrics;
  /** The directory's verdicts on a stream's caller, and when they change. */
  directory: { verdictOn(caller: User): string | null; onChange(listener: () => void): unknown };
  /** The one authentication, and the sessions behind streams (as stored, and as sign-out revokes them). */
  auth: Pick<Auth, 'callers' | 'sessionStore' | 'sessions'>;
  services: Services;
  pipeline: Pipeline;
  trustedOrigins: ReadonlySet<string>;
}) {
  const { config, logger, metrics, directory, pipeline, trustedOrigins } = deps;
  const callers = deps.auth.callers;
  const streams = createStreamRegistry({
    limits: config.streams,
    sessions: deps.auth.sessionStore,
    channelPrefix: `orders-api:${deps.db.identity}`,
    logger,
    onRefused: () => metrics.refusals.inc({ reason: 'stream_limit' }),
    verdict: (caller) => directory.verdictOn(caller),
    ...(deps.redis ? { redis: deps.redis } : {}),
  });
  // A deactivation (or a change of staff membership) at the directory ends the person's open streams at once.
  directory.onChange(() => streams.recheckCallers());
  const sharedExecution = createSharedExecution({ pipeline, metrics, logger });
  const subscriptions = createSubscribePath({ services: deps.services, pipeline, sharedExecution, metrics });
  const sse = createSseRouter({ subscriptions, auth: callers, trustedOrigins, streams });
  const websockets = createWebSocketServer({
    subscriptions,
    sharedExecution,
    auth: callers,
    logger,
    trustedOrigins,
    streams,
    trust: proxyTrust(config.trustProxy),
  });
  return {
    streams,
    sse,
    /** WebSocket subscriptions share the /graphql path with HTTP. */
    websockets,
    /** Sessions whose revocation (sign-out) also ends the streams they opened. */
    sessions: endingStreamsOnRevoke(deps.auth.sessions, streams),
  };
}
