import express from 'express';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { createAuth, type TokenVerifier } from './auth/index.js';
import type { Config } from './config/index.js';
import { createDirectoryAccess } from './domain/directoryAccess.js';
import type { DirectoryChanges } from './domain/ports.js';
import { createServices } from './domain/services.js';
import { createAuthRouter, favicon, homeRoute } from './http/browser/index.js';
import {
  createEventChannel,
  createGraphiqlRouter,
  createGraphqlRouter,
  frontDoor,
  GRAPHIQL_PATH,
} from './http/graphql/index.js';
import {
  authCookies,
  createRateBudget,
  crossOrigin,
  securityHeaders,
  trustedOrigins,
} from './http/middleware/index.js';
import {
  countingRefusals,
  createMetrics,
  observeDatabase,
  probes,
  requestRecorder,
  requestLog,
  traceRequests,
  webhookMetrics,
} from './http/observability/index.js';
import { createPipeline, withResolverSpans } from './http/pipeline/index.js';
import { lastResort, problemPages, routeNotFound } from './http/problems/index.js';
import { createRealtime } from './http/realtime/index.js';
import { createRestRouter, orderJson } from './http/rest/index.js';
import { createScimRouter, scimNotConfigured } from './http/scim/index.js';
import { buildSchema } from './resolvers/schema.js';
import type { Database } from './store/db.js';
import { createDirectoryFeed } from './store/directoryFeed.js';
import { createEventBus } from './store/eventBus.js';
import { createStorage } from './store/repositories.js';
import { createSweeper, EXPIRED_ROWS } from './store/sweeper.js';
import { createWebhookQueue } from './store/webhookQueue.js';
import { tracing } from './tracing.js';
import {
  prepareWebhookDelivery,
  startWebhookDelivery,
  notingOwnerRoles,
  type CreateConnection,
  type HostLookup,
} from './webhooks/index.js';

export interface AppDeps {
  readonly config: Config;
  readonly db: Database;
  readonly logger: Logger;
  readonly redis?: Redis;
  /**
   * How webhook deliveries reach the network: a DNS lookup and a socket opener of the caller's (tests map names to
   * addresses and count sockets, so that nothing leaves the machine). Node's own when absent.
   */
  readonly webhookNetwork?: { readonly lookup?: HostLookup; readonly createConnection?: CreateConnection };
}

/** Builds the whole HTTP application without listening, so tests and main share it: wiring only. */
export async function createApp({ config, db, logger, redis, webhookNetwork }: AppDeps) {
  const metrics = createMetrics();
  const base = { config, db, logger, metrics, ...(redis ? { redis } : {}) };
  observeDatabase(db, metrics, logger);
  const bus = await createEventBus({ ...base, pollMs: config.eventPollMs });
  const channel = createEventChannel(bus);
  // What the directory (SCIM) says about callers, on every replica: filled before the first request, kept in sync.
  const directory = createDirectoryAccess();
  const onChanges = (changes: DirectoryChanges) => directory.apply(changes);
  const directoryFeed = await createDirectoryFeed({ ...base, staffGroup: config.scim.staffGroup, onChanges });
  const storage = createStorage(db);
  const webhooks = prepareWebhookDelivery({ ...base, network: webhookNetwork });
  const services = createServices(storage, channel.events, directoryFeed, config, { directory, ...webhooks.rules });
  const queue = createWebhookQueue(db);
  const delivery = { storage, queue, service: services.webhooks, represent: orderJson, events: bus };
  const deliveries = startWebhookDelivery(webhooks, { ...delivery, metrics: webhookMetrics(metrics, queue) });
  // Resolver spans are for debugging only (OTEL_GRAPHQL_RESOLVER_SPANS): the schema's resolvers are wrapped once.
  const schema = tracing.resolverSpans ? withResolverSpans(buildSchema()) : buildSchema();
  const budget = countingRefusals(createRateBudget({ ...base, ...config.rateLimit, namespace: db.identity }), metrics);
  const pipeline = createPipeline({ ...base, schema, budget });
  const knownCustomerId = (subject: string) => services.customers.knownIdOf(subject);
  const resultCache = channel.cacheResults({ ...base, schema, pipeline, options: config.resultCache, knownCustomerId });
  const sessionCookie = authCookies(config.publicUrl).session;
  // Webhook endpoints follow their owner's newest credential: its roles are noted on the way in.
  const noting = (tokens: TokenVerifier) => notingOwnerRoles(tokens, services.webhooks, logger);
  const auth = await createAuth({ ...base, directory, sessionCookie, noting });
  const trusted = trustedOrigins(config.publicUrl, config.corsOrigins);
  const graphqlParts = { ...base, schema, services, pipeline, trustedOrigins: trusted };
  const realtime = createRealtime({ ...graphqlParts, directory, auth });
  const graphql = await createGraphqlRouter({ ...graphqlParts, auth: auth.callers, resultCache });
  const sweeps = { ...EXPIRED_ROWS, ...auth.sweeps };
  const sweeper = createSweeper({ ...base, intervalMs: config.sweepIntervalSeconds * 1000, tasks: sweeps });
  const { sessions } = realtime;

  let draining = false;
  const probe = probes({ db, redis, draining: () => draining });
  const app = express();
  app.disable('x-powered-by');
  // Resources set strong validators of their own; hashing every body for a weak one costs time.
  app.set('etag', false);
  app.set('trust proxy', config.trustProxy);
  const everyRequest = [
    // First, so that everything after it (the request log included) runs inside the request's span.
    ...(tracing.enabled ? [traceRequests()] : []),
    securityHeaders(),
    // One listener per response, for its log line and its metrics.
    requestLog(logger, { sample: config.requestLogSample, record: requestRecorder(metrics) }),
    ...(config.corsOrigins.length ? [crossOrigin(config.corsOrigins)] : []),
  ];
  // GraphQL over HTTP, the busiest path, through one layer: these same steps, then its own (frontDoor.ts).
  app.use(frontDoor('/graphql', [...everyRequest, ...graphql.steps], routeNotFound));
  app.use(...everyRequest);

  // Where a browser lands after signing in or out, and where a new user looks first.
  app.get(
    '/',
    homeRoute({ sessionCookie, touch: sessions.touch, developmentTools: !config.isProduction, stepUp: config.stepUp }),
  );
  app.get('/favicon.ico', favicon);
  app.get('/healthz', probe.healthz);
  app.get('/readyz', probe.readyz);
  if (auth.idp) app.use('/idp', auth.idp.router);
  app.use('/auth', createAuthRouter({ config, sessions, login: auth.login, budget }));
  app.use('/graphql/stream', realtime.sse.router);
  app.use('/graphql', graphql.router);
  // Development only, like Sandbox: production answers 404 there.
  if (!config.isProduction) app.use(GRAPHIQL_PATH, createGraphiqlRouter());
  app.use('/v1', createRestRouter({ services, auth: auth.tokensOnly, budget }));
  app.use(
    '/scim',
    config.scim.enabled
      ? createScimRouter({
          provisioning: services.provisioning,
          publicUrl: config.publicUrl,
          ...(config.scim.token ? { token: config.scim.token } : {}),
          ...(config.scim.scope ? { scope: config.scim.scope } : {}),
          auth: auth.directoryClient,
          budget,
        })
      : scimNotConfigured,
  );
  app.use('/problems', problemPages());
  app.use(routeNotFound);
  app.use(lastResort);

  return {
    app,
    db,
    services,
    metrics,
    issuer: auth.issuer,
    budget,
    /** The directory's verdicts: `isDeactivated(key)` for work done on someone's behalf outside a request. */
    directory,
    sweeper,
    /** WebSocket subscriptions share the /graphql path with HTTP. */
    websockets: realtime.websockets,
    /** Settles once an external issuer's support for the step-up acr values has been checked (and logged). */
    acrSupportChecked: auth.acrSupportChecked,
    /** Readiness turns false first, so the load balancer stops sending before sockets close. */
    startDraining() {
      draining = true;
    },
    /** Ends every open SSE stream, telling the client why. */
    endStreams() {
      realtime.sse.close();
    },
    async close() {
      await deliveries.close();
      await graphql.stop();
      await auth.close();
      realtime.sse.close();
      await sweeper.stop();
      await realtime.streams.close();
      await bus.close();
      await directoryFeed.close();
      await budget.close();
    },
  };
}

export type App = Awaited<ReturnType<typeof createApp>>;
