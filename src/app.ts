import express from 'express';
import { createLocalJWKSet } from 'jose';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { reportAcrSupport } from './auth/acrSupport.js';
import { createTokenVerifier, discoveredJwks } from './auth/bearer.js';
import { browserLoginFor } from './auth/browserLogin.js';
import { createAuthentication, sessionsAdmittedBy } from './auth/credentials.js';
import { createDpopProofVerifier } from './auth/dpop.js';
import type { EmbeddedIdpOptions } from './auth/embeddedIdp.js';
import { createSessionStore, deleteExpiredSessions } from './auth/sessions.js';
import type { Config } from './config.js';
import { createDirectoryAccess } from './domain/directoryAccess.js';
import type { EventChannel } from './domain/ports.js';
import { createServices } from './domain/services.js';
import { createAuthRouter, favicon, homeRoute } from './http/browser/index.js';
import {
  createGraphiqlRouter,
  createGraphqlRouter,
  createResultCache,
  GRAPHIQL_PATH,
  type ResultCache,
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
  probes,
  recordRequests,
  requestLog,
  traceRequests,
} from './http/observability/index.js';
import { createPipeline, withResolverSpans } from './http/pipeline/index.js';
import { lastResort, problemPages, routeNotFound } from './http/problems/index.js';
import {
  createSharedExecution,
  createSseRouter,
  createStreamRegistry,
  createSubscribePath,
  createWebSocketServer,
  endingStreamsOnRevoke,
} from './http/realtime/index.js';
import { createRestRouter, orderJson } from './http/rest/index.js';
import { createScimRouter, scimNotConfigured } from './http/scim/index.js';
import { buildSchema } from './resolvers/schema.js';
import type { Database } from './store/db.js';
import { createDirectoryFeed } from './store/directoryFeed.js';
import { databaseReplayStore, deleteExpiredProofIds, redisReplayStore } from './store/dpopReplay.js';
import { createEventBus } from './store/eventBus.js';
import { deleteOldEvents } from './store/events.js';
import { deleteExpiredKeys } from './store/idempotency.js';
import { createStorage } from './store/repositories.js';
import { createSweeper } from './store/sweeper.js';
import { deleteOldWebhookMessages } from './store/webhooks.js';
import { createWebhookQueue } from './store/webhookQueue.js';
import { tracing } from './tracing.js';
import {
  createDeliveryWorker,
  createSender,
  type CreateConnection,
  type DeliveryWorker,
  type HostLookup,
  notingOwnerRoles,
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
  db.onStatement = () => metrics.sqlStatements.inc();
  db.onAvailability = (available, cause) => {
    metrics.databaseUnreachable.set(available ? 0 : 1);
    if (available) logger.info({ event: 'database.reachable' }, 'the database answers again');
    else
      logger.warn(
        { event: 'database.unreachable', err: cause },
        'the database does not take connections: requests are answered 503 at once until a probe connects',
      );
  };
  const bus = await createEventBus({ db, logger, pollMs: config.eventPollMs, ...(redis ? { redis } : {}) });
  // The result cache is flushed at commit on this replica, before the write's response leaves, and by the bus for
  // every other replica's writes; `resultCache` is set below, before any request can write.
  let resultCache: ResultCache | undefined;
  const events: EventChannel = {
    publish(event) {
      resultCache?.onEvent(event, true);
      bus.publish(event);
    },
    listen: (listener) => bus.listen(listener),
  };
  // What the directory (SCIM) says about callers, on every replica: filled before the first request, kept in sync.
  const directory = createDirectoryAccess();
  const directoryFeed = await createDirectoryFeed({
    db,
    logger,
    staffGroup: config.scim.staffGroup,
    onChanges: (changes) => directory.apply(changes),
    ...(redis ? { redis } : {}),
  });
  const storage = createStorage(db);
  const webhookConfig = config.webhooks;
  if (webhookConfig.allowPrivateUrls && config.isProduction) {
    logger.warn(
      { event: 'webhooks.private_urls_allowed' },
      'WEBHOOK_ALLOW_PRIVATE_URLS is on: webhooks may call http and loopback, private and metadata addresses',
    );
  }
  const sender = createSender({
    timeoutMs: webhookConfig.timeoutMs,
    allowPrivate: webhookConfig.allowPrivateUrls,
    // Endpoints may share a host: the per-endpoint bound is the claim's, the sockets only the replica's.
    maxSocketsPerHost: Math.max(1, webhookConfig.concurrency),
    ...webhookNetwork,
  });
  // The worker needs the services and the services tell the worker: it is set right below, before any request.
  const queued: { worker?: DeliveryWorker } = {};
  const services = createServices(
    storage,
    events,
    directoryFeed,
    { stepUp: config.stepUp },
    {
      directory,
      targets: sender.targets,
      requireHttps: config.isProduction && !webhookConfig.allowPrivateUrls,
      maxAttempts: webhookConfig.retryScheduleSeconds.length,
      onQueued: () => queued.worker?.nudge(),
    },
  );
  const webhookQueue = createWebhookQueue(db);
  metrics.webhookBacklog.source = () => webhookQueue.backlogSeconds();
  const deliveries = createDeliveryWorker({
    storage,
    queue: webhookQueue,
    service: services.webhooks,
    sender,
    represent: orderJson,
    scheduleSeconds: webhookConfig.retryScheduleSeconds,
    timeoutMs: webhookConfig.timeoutMs,
    pollMs: webhookConfig.pollMs,
    concurrency: webhookConfig.concurrency,
    perEndpoint: webhookConfig.endpointConcurrency,
    perOwner: webhookConfig.ownerConcurrency,
    disableAfterMs: webhookConfig.disableAfterSeconds * 1000,
    logger: logger.child({ component: 'webhooks' }),
    metrics: {
      attempt(result, seconds) {
        metrics.webhookDeliveries.inc({ result });
        if (result !== 'cancelled') metrics.webhookDeliverySeconds.observe(seconds);
      },
    },
  });
  queued.worker = deliveries;
  // Every committed order event, from any replica, may make messages: derive and send them now.
  bus.listen(() => deliveries.nudge());
  deliveries.nudge();
  // Resolver spans are for debugging only (OTEL_GRAPHQL_RESOLVER_SPANS): the schema's resolvers are wrapped once.
  const schema = tracing.resolverSpans ? withResolverSpans(buildSchema()) : buildSchema();
  const budget = countingRefusals(
    createRateBudget({ ...config.rateLimit, redis, namespace: db.identity, logger }),
    metrics,
  );
  const pipeline = createPipeline({ schema, config, budget, metrics, ...(redis ? { redis } : {}) });
  if (config.resultCache.enabled) {
    const cache = createResultCache({
      schema,
      pipeline,
      metrics,
      options: config.resultCache,
      knownCustomerId: (subject) => services.customers.knownIdOf(subject),
    });
    bus.listen((event) => cache.onEvent(event));
    resultCache = cache;
  }

  const idp = config.oidc.issuer
    ? null
    : await startEmbeddedIdp({
        issuer: `${config.publicUrl}/idp`,
        publicUrl: config.publicUrl,
        db,
        audience: config.oidc.audience,
        trustProxy: config.trustProxy !== false,
        logger: logger.child({ component: 'idp' }),
        redis,
        signinLockSeconds: config.signin.lockSeconds,
        // Changing factors needs a sign-in as recent as a staff change does.
        factorChangeMaxAgeSeconds: config.stepUp?.maxAgeSeconds,
        nodeEnv: config.nodeEnv,
      });
  const issuer = config.oidc.issuer ?? idp!.issuer;
  // The embedded IdP issues the step-up levels itself; an external one is asked (its metadata) once, at start.
  const acrSupportChecked =
    config.oidc.issuer && config.stepUp
      ? reportAcrSupport(config.oidc.issuer, config.stepUp.acrValues, logger)
      : Promise.resolve();
  // Used DPoP proof ids must be seen by every replica: Redis when there is one, else the shared database.
  const proofReplay = redis ? redisReplayStore(redis) : databaseReplayStore(db);
  const tokens = createTokenVerifier({
    issuer,
    audience: config.oidc.audience,
    rolesClaim: config.oidc.rolesClaim,
    linkClaim: config.scim.linkClaim,
    // The embedded provider's keys are at hand; any other issuer's come from its discovery document.
    keys: idp ? createLocalJWKSet(idp.publicJwks) : discoveredJwks(issuer, config.oidc.jwksMaxAgeSeconds * 1000),
    dpop: createDpopProofVerifier({ publicUrl: config.publicUrl, replay: proofReplay }),
  });
  // Webhook endpoints follow their owner's newest credential: its roles are noted on the way in.
  const verifier = notingOwnerRoles(tokens, services.webhooks, logger);
  const sessionStore = createSessionStore(db, { loginAttemptsPerIp: config.loginAttemptsPerIp });
  const streams = createStreamRegistry({
    limits: config.streams,
    sessions: sessionStore,
    channelPrefix: `orders-api:${db.identity}`,
    logger,
    onRefused: () => metrics.refusals.inc({ reason: 'stream_limit' }),
    verdict: (caller) => directory.verdictOn(caller),
    ...(redis ? { redis } : {}),
  });
  // A deactivation (or a change of staff membership) at the directory ends the person's open streams at once.
  directory.onChange(() => streams.recheckCallers());
  const sessions = endingStreamsOnRevoke(sessionsAdmittedBy(sessionStore, directory), streams);
  const sweeper = createSweeper({
    db,
    intervalMs: config.sweepIntervalSeconds * 1000,
    logger,
    tasks: {
      idempotencyKeys: deleteExpiredKeys,
      sessions: deleteExpiredSessions,
      orderEvents: deleteOldEvents,
      dpopProofIds: deleteExpiredProofIds,
      webhookMessages: deleteOldWebhookMessages,
    },
  });
  // The session cookie authenticates GraphQL on every transport; REST stays token-only. Streams it opens end with
  // the session (logout, expiry, revocation) through the stream registry, so the principal carries no end.
  const sessionCookie = authCookies(config.publicUrl).session;
  const callers = createAuthentication(
    verifier,
    {
      cookieName: sessionCookie,
      lookup: async (id: string) => (await sessions.touch(id))?.user ?? null,
    },
    directory,
  );
  const trusted = trustedOrigins(config.publicUrl, config.corsOrigins);
  const graphql = await createGraphqlRouter({
    schema,
    config,
    services,
    auth: callers,
    metrics,
    logger,
    pipeline,
    trustedOrigins: trusted,
    ...(resultCache ? { resultCache } : {}),
  });
  const sharedExecution = createSharedExecution({ pipeline, metrics, logger });
  const subscriptions = createSubscribePath({ services, pipeline, sharedExecution, metrics });
  const sse = createSseRouter({ subscriptions, auth: callers, trustedOrigins: trusted, streams });
  const websockets = createWebSocketServer({
    subscriptions,
    sharedExecution,
    auth: callers,
    logger,
    trustedOrigins: trusted,
    streams,
    trustProxy: config.trustProxy,
  });

  let draining = false;
  const probe = probes({ db, redis, draining: () => draining });
  const app = express();
  app.disable('x-powered-by');
  // First, so that everything after it (the request log included) runs inside the request's span.
  if (tracing.enabled) app.use(traceRequests());
  app.use(securityHeaders());
  // Resources set strong validators of their own; hashing every body for a weak one costs time.
  app.set('etag', false);
  app.set('trust proxy', config.trustProxy);
  app.use(requestLog(logger, { sample: config.requestLogSample }));
  app.use(recordRequests(metrics));
  if (config.corsOrigins.length) app.use(crossOrigin(config.corsOrigins));

  // Where a browser lands after signing in or out, and where a new user looks first.
  app.get(
    '/',
    homeRoute({ sessionCookie, touch: sessions.touch, developmentTools: !config.isProduction, stepUp: config.stepUp }),
  );
  app.get('/favicon.ico', favicon);
  app.get('/healthz', probe.healthz);
  app.get('/readyz', probe.readyz);
  if (idp) app.use('/idp', idp.router);
  app.use('/auth', createAuthRouter({ config, sessions, login: browserLoginFor(config, issuer, verifier), budget }));
  app.use('/graphql/stream', sse.router);
  app.use('/graphql', graphql.router);
  // Development only, like Sandbox: production answers 404 there.
  if (!config.isProduction) app.use(GRAPHIQL_PATH, createGraphiqlRouter());
  app.use('/v1', createRestRouter({ services, auth: createAuthentication(verifier, undefined, directory), budget }));
  app.use(
    '/scim',
    config.scim.enabled
      ? createScimRouter({
          provisioning: services.provisioning,
          publicUrl: config.publicUrl,
          ...(config.scim.token ? { token: config.scim.token } : {}),
          ...(config.scim.scope ? { scope: config.scim.scope } : {}),
          auth: createAuthentication(verifier),
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
    issuer,
    budget,
    /** The directory's verdicts: `isDeactivated(key)` for work done on someone's behalf outside a request. */
    directory,
    sweeper,
    /** WebSocket subscriptions share the /graphql path with HTTP. */
    websockets,
    /** Settles once an external issuer's support for the step-up acr values has been checked (and logged). */
    acrSupportChecked,
    /** Readiness turns false first, so the load balancer stops sending before sockets close. */
    startDraining() {
      draining = true;
    },
    /** Ends every open SSE stream, telling the client why. */
    endStreams() {
      sse.close();
    },
    async close() {
      await deliveries.close();
      await graphql.stop();
      await idp?.close();
      sse.close();
      await sweeper.stop();
      await streams.close();
      await bus.close();
      await directoryFeed.close();
      await budget.close();
      proofReplay.close();
    },
  };
}

export type App = Awaited<ReturnType<typeof createApp>>;

/** Loaded on demand: with an external issuer (always so in production) oidc-provider is never imported. */
async function startEmbeddedIdp({
  nodeEnv,
  ...opts
}: Omit<EmbeddedIdpOptions, 'passwordHashing' | 'signinDelayMs'> & { nodeEnv: Config['nodeEnv'] }) {
  // One after the other: Jest's ESM linker fails when two dynamic imports race to link a module they share.
  const { createEmbeddedIdp } = await import('./auth/embeddedIdp.js');
  const { argon2Params } = await import('./auth/idp/users.js');
  const { signinDelayMs } = await import('./auth/idp/signinThrottle.js');
  return createEmbeddedIdp({
    ...opts,
    passwordHashing: argon2Params(nodeEnv),
    signinDelayMs: signinDelayMs(nodeEnv),
  });
}
