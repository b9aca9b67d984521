import cors from 'cors';
import express, { type NextFunction, type Request, type Response } from 'express';
import { createLocalJWKSet } from 'jose';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { createTokenVerifier, discoveredJwks } from './auth/bearer.js';
import { browserLoginFor } from './auth/browserLogin.js';
import { createDpopProofVerifier } from './auth/dpop.js';
import type { EmbeddedIdpOptions } from './auth/embeddedIdp.js';
import { createSessionStore, deleteExpiredSessions } from './auth/sessions.js';
import type { Config } from './config.js';
import { DomainError, RETRY_AFTER_SECONDS } from './domain/errors.js';
import type { EventChannel } from './domain/ports.js';
import { createServices, type Services } from './domain/services.js';
import { createAuthRouter } from './http/browser/signIn.js';
import { CLIENT_ERROR_CODES, clientError } from './http/problems/unreadableRequests.js';
import { authCookies, trustedOrigins } from './http/middleware/cookies.js';
import { createGraphiqlRouter, GRAPHIQL_PATH } from './http/graphql/graphiql.js';
import { createGraphqlRouter } from './http/graphql/router.js';
import { homeRoute } from './http/browser/home.js';
import { createMetrics, recordRequests, type Metrics } from './http/observability/metrics.js';
import { createFanout } from './http/realtime/sharedExecution.js';
import { requestLog } from './http/observability/requestLog.js';
import { createPipeline } from './http/pipeline/pipeline.js';
import { createRateBudget, type RateBudget } from './http/middleware/rateBudget.js';
import { problemPage, sendProblem } from './http/problems/catalogue.js';
import { createRestRouter } from './http/rest/index.js';
import { createResultCache, type ResultCache } from './http/graphql/resultCache.js';
import { securityHeaders } from './http/middleware/securityHeaders.js';
import { buildSchema } from './resolvers/schema.js';
import { createSseRouter } from './http/realtime/sse.js';
import { createStreamRegistry, endingStreamsOnRevoke } from './http/realtime/streamRegistry.js';
import { createWebSocketServer } from './http/realtime/webSocketServer.js';
import type { Database } from './store/db.js';
import { databaseReplayStore, deleteExpiredProofIds, redisReplayStore } from './store/dpopReplay.js';
import { createEventBus } from './store/eventBus.js';
import { deleteOldEvents } from './store/events.js';
import { deleteExpiredKeys } from './store/idempotency.js';
import { createStorage } from './store/repositories.js';
import { createSweeper } from './store/sweeper.js';
import { redisReady } from './store/redis.js';

export interface AppDeps {
  readonly config: Config;
  readonly db: Database;
  readonly logger: Logger;
  readonly redis?: Redis;
}

/** Builds the whole HTTP application without listening, so tests and main share it. */
export async function createApp({ config, db, logger, redis }: AppDeps) {
  const metrics = createMetrics();
  db.onStatement = () => metrics.sqlStatements.inc();
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
  const services = countingSubscriptions(createServices(createStorage(db), events), metrics);
  const schema = buildSchema();
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
        nodeEnv: config.nodeEnv,
      });
  const issuer = config.oidc.issuer ?? idp!.issuer;
  // Used DPoP proof ids must be seen by every replica: Redis when there is one, else the shared database.
  const proofReplay = redis ? redisReplayStore(redis) : databaseReplayStore(db);
  const verifier = createTokenVerifier({
    issuer,
    audience: config.oidc.audience,
    rolesClaim: config.oidc.rolesClaim,
    // The embedded provider's keys are at hand; any other issuer's come from its discovery document.
    keys: idp ? createLocalJWKSet(idp.publicJwks) : discoveredJwks(issuer),
    dpop: createDpopProofVerifier({ publicUrl: config.publicUrl, replay: proofReplay }),
  });
  const sessionStore = createSessionStore(db, { loginAttemptsPerIp: config.loginAttemptsPerIp });
  const streams = createStreamRegistry({
    limits: config.streams,
    sessions: sessionStore,
    channelPrefix: `orders-api:${db.identity}`,
    logger,
    onRefused: () => metrics.refusals.inc({ reason: 'stream_limit' }),
    ...(redis ? { redis } : {}),
  });
  const sessions = endingStreamsOnRevoke(sessionStore, streams);
  const sweeper = createSweeper({
    db,
    intervalMs: config.sweepIntervalSeconds * 1000,
    logger,
    tasks: {
      idempotencyKeys: deleteExpiredKeys,
      sessions: deleteExpiredSessions,
      orderEvents: deleteOldEvents,
      dpopProofIds: deleteExpiredProofIds,
    },
  });
  const authRouter = createAuthRouter({ config, sessions, login: browserLoginFor(config, issuer, verifier) });
  // The session cookie authenticates GraphQL on every transport (REST stays Bearer-only). Streams it opens end
  // with the session (logout, expiry, revocation) through the stream registry, so the principal carries no end.
  const sessionAuth = {
    cookieName: authCookies(config.publicUrl).session,
    lookup: async (id: string) => (await sessions.touch(id))?.user ?? null,
  };
  const trusted = trustedOrigins(config.publicUrl, config.corsOrigins);
  const graphql = await createGraphqlRouter({
    schema,
    config,
    services,
    verifier,
    metrics,
    logger,
    pipeline,
    session: sessionAuth,
    trustedOrigins: trusted,
    ...(resultCache ? { resultCache } : {}),
  });

  const fanout = createFanout({ pipeline, metrics, logger });
  const sse = createSseRouter({
    pipeline,
    fanout,
    services,
    verifier,
    logger,
    session: sessionAuth,
    trustedOrigins: trusted,
    streams,
  });

  let draining = false;
  const app = express();
  app.disable('x-powered-by');
  app.use(securityHeaders());
  // Resources set strong validators of their own; hashing every body for a weak one costs time.
  app.set('etag', false);
  app.set('trust proxy', config.trustProxy);
  app.use(requestLog(logger, { sample: config.requestLogSample }));
  app.use(recordRequests(metrics));
  if (config.corsOrigins.length) {
    app.use(
      cors({
        origin: [...config.corsOrigins],
        credentials: true,
        exposedHeaders: [
          'ETag',
          'Location',
          'Link',
          'X-Request-Id',
          'WWW-Authenticate',
          'Idempotent-Replayed',
          'RateLimit',
          'RateLimit-Policy',
          'Retry-After',
        ],
        maxAge: 600,
      }),
    );
  }

  // Where a browser lands after signing in or out, and where a new user looks first.
  app.get(
    '/',
    homeRoute({ sessionCookie: sessionAuth.cookieName, touch: sessions.touch, developmentTools: !config.isProduction }),
  );
  // Browsers ask for it on every page; an empty answer they may cache beats a 404 in every log.
  app.get('/favicon.ico', (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=86400');
    res.status(204).end();
  });
  app.get('/healthz', (_req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    if (draining) return res.status(503).json({ status: 'draining' });
    // Redis down is a degraded mode, not unreadiness: state stays in process and the outbox is polled.
    const cache = redis ? { redis: redisReady(redis) ? 'ready' : 'unavailable' } : {};
    try {
      await db.ping();
      res.json({ status: 'ready', ...cache });
    } catch (error) {
      req.log.warn({ err: error }, 'readiness check failed');
      res.status(503).json({ status: 'database unreachable', ...cache });
    }
  });

  if (idp) app.use('/idp', idp.router);
  app.use('/auth', authRouter);
  app.use('/graphql/stream', sse.router);
  app.use('/graphql', graphql.router);
  // Development only, like Sandbox: production answers 404 there.
  if (!config.isProduction) app.use(GRAPHIQL_PATH, createGraphiqlRouter());
  app.use('/v1', createRestRouter({ services, verifier, budget }));
  app.get('/problems/:slug', (req, res, next) => {
    const page = problemPage(req.params.slug);
    if (!page) return next();
    res.set('Cache-Control', 'public, max-age=86400').type('html').send(page);
  });

  app.use((req: Request, res: Response) =>
    sendProblem(req, res, 'ROUTE_NOT_FOUND', `Nothing is served at ${req.path}.`),
  );
  app.use((error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    // Routes outside /v1 and /graphql (sign-in, readiness) meet a database outage here.
    if (error instanceof DomainError && error.code === 'SERVICE_UNAVAILABLE') {
      return sendProblem(req, res, 'SERVICE_UNAVAILABLE', error.message, {
        headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) },
      });
    }
    const refused = clientError(error, 'the limit');
    if (refused) return sendProblem(req, res, CLIENT_ERROR_CODES[refused.status], refused.detail);
    req.log.error({ err: error }, 'unhandled error');
    sendProblem(req, res, 'INTERNAL_SERVER_ERROR', `Something went wrong; quote request id ${String(req.id)}.`);
  });

  return {
    app,
    db,
    services,
    metrics,
    issuer,
    budget,
    sweeper,
    /** WebSocket subscriptions share the /graphql path with HTTP. */
    websockets: createWebSocketServer({
      pipeline,
      fanout,
      services,
      verifier,
      logger,
      session: sessionAuth,
      trustedOrigins: trusted,
      streams,
      trustProxy: config.trustProxy,
    }),
    /** Readiness turns false first, so the load balancer stops sending before sockets close. */
    startDraining() {
      draining = true;
    },
    /** Ends every open SSE stream, telling the client why. */
    endStreams() {
      sse.close();
    },
    async close() {
      await graphql.stop();
      await idp?.close();
      sse.close();
      await sweeper.stop();
      await streams.close();
      await bus.close();
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

/** A refused charge is a refusal, whichever transport asked (GraphQL cost or a REST price). */
function countingRefusals(budget: RateBudget, metrics: Metrics): RateBudget {
  return {
    async charge(key, points) {
      const charge = await budget.charge(key, points);
      if (!charge.allowed) metrics.refusals.inc({ reason: 'rate_budget' });
      return charge;
    },
    close: () => budget.close(),
  };
}

/** Open subscriptions, counted where every transport's subscription gets its events. */
function countingSubscriptions(services: Services, metrics: Metrics): Services {
  const { subscriptions } = services;
  const orderEvents = subscriptions.orderEvents.bind(subscriptions);
  subscriptions.orderEvents = async (...args) => {
    const stream = await orderEvents(...args);
    metrics.openSubscriptions.inc();
    let open = true;
    const closed = () => {
      if (open) metrics.openSubscriptions.dec();
      open = false;
    };
    const iterator = stream[Symbol.asyncIterator]();
    const counted: typeof stream = {
      [Symbol.asyncIterator]() {
        return this;
      },
      async next() {
        const step = await iterator.next();
        if (step.done) closed();
        return step;
      },
      async return(value?: unknown) {
        closed();
        return (await iterator.return?.(value)) ?? { done: true, value: undefined };
      },
      async throw(error?: unknown) {
        closed();
        if (iterator.throw) return iterator.throw(error);
        throw error;
      },
    };
    return counted;
  };
  return services;
}
