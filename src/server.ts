import { createServer, maxHeaderSize, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from 'pino';
import { createApp, type App, type AppDeps } from './app.js';
import { serveMetrics, startTracing, type RefusalReason } from './http/observability/index.js';
import {
  answerUnreadableRequest,
  connectionTable,
  CONNECTIONS_CHECK_MS,
  drainConnections,
  expressPrototypes,
  watchBody,
} from './http/connections/index.js';
import { isTrustedPeer, proxyTrust } from './http/middleware/index.js';
import { rawProblem, RETRY_LATER, sendEarlyProblem } from './http/problems/index.js';
import type { Config } from './config/index.js';
import type { Database } from './store/db.js';
import { openDatabase } from './store/open.js';
import { migrate } from './store/migrations.js';
import { closeRedis, openRedis } from './store/redis.js';
import { seed } from './store/seed.js';
import { traceRedisCommands } from './store/redisSpans.js';

const DRAIN_TIMEOUT_MS = 10_000;

export interface RunningServer {
  /** Where this process listens, e.g. http://127.0.0.1:4000. */
  readonly url: string;
  /** The externally visible base URL (PUBLIC_URL). */
  readonly publicUrl: string;
  /** Where GET /metrics answers (METRICS_PORT), if it is served. */
  readonly metricsUrl?: string;
  readonly app: App;
  /** Not ready → finish in-flight requests → close sockets, database and Redis. */
  close(): Promise<void>;
}

/**
 * Composition root: store → app → listen. The socket opens first (answering 503 until the app is
 * built) so that PORT=0 can pick a free port that the default PUBLIC_URL then follows.
 */
export async function startServer(
  config: Config,
  logger: Logger,
  /** An open database to use instead of config.database; the caller keeps ownership and closes it. */
  opts: { db?: Database; webhookNetwork?: AppDeps['webhookNetwork'] } = {},
): Promise<RunningServer> {
  // Before anything that makes spans; with tracing off this loads nothing.
  const stopTracing = await startTracing(config.tracing, logger);
  const stopRedisSpans = config.tracing.enabled ? traceRedisCommands() : () => undefined;
  const db = opts.db ?? (await openDatabase(config.database));
  const closeDb = opts.db ? async () => undefined : () => db.close();
  const applied = await migrate(db);
  if (applied.length) logger.info({ migrations: applied }, 'migrations applied');
  if (await seed(db)) logger.info('seeded demo data');
  const redis = config.redisUrl ? await openRedis(config.redisUrl, logger) : undefined;

  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | null = null;
  let draining = false;
  /** The connections open when the drain began. */
  let openBefore: ReadonlySet<Socket> | undefined;
  const { requestTimeoutSeconds, bodyIdleTimeoutSeconds, maxConnectionsPerIp, maxProxyConnections } = config.httpServer;
  const born = expressPrototypes();
  const server = createServer(
    {
      IncomingMessage: born.IncomingMessage,
      ServerResponse: born.ServerResponse,
      // Node's own Host check answers a bare `400` with no body; the request handler answers it as problem details.
      requireHostHeader: false,
      // Behind a load balancer, idle keep-alive connections must outlive the balancer's own idle timeout.
      keepAliveTimeout: 65_000,
      // One bound for the whole request, its headers included. Node checks it every connectionsCheckingInterval
      // (30 s unless told), so a slow request would otherwise be cut up to that much late.
      requestTimeout: requestTimeoutSeconds * 1000,
      headersTimeout: requestTimeoutSeconds * 1000,
      connectionsCheckingInterval: CONNECTIONS_CHECK_MS,
    },
    (req, res) => {
      // Already answered 503 when it connected: nothing read on it is served.
      if (table.isRefused(req.socket)) return;
      table.opened(req, res);
      watchBody(req, res, { idleMs: bodyIdleTimeoutSeconds * 1000, onTimedOut: () => refused('request_timeout') });
      // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without exactly one Host.
      if (req.httpVersion === '1.1' && req.headers.host === undefined) {
        res.shouldKeepAlive = false;
        return sendEarlyProblem(req, res, 'MALFORMED_REQUEST', 'An HTTP/1.1 request must carry a Host header.');
      }
      if (draining) {
        // Served, and its connection then closes: a request cannot tell whether a balancer would retry it. Refused
        // (503, Retry-After) are only a new stream, which would be cut at once, and a request whose method balancers
        // retry (GET, HEAD…) on a connection opened since the drain began, so that the balancer counts this replica
        // as failing and stops opening connections to it.
        res.shouldKeepAlive = false;
        if (isStreamRequest(req) || (RETRIED.has(req.method ?? '') && !openBefore?.has(req.socket)))
          return refuseWhileDraining(req, res);
      }
      if (handler) return handler(req, res);
      sendEarlyProblem(req, res, 'SERVICE_UNAVAILABLE', 'Starting up.', RETRY_LATER);
    },
  );
  // The app's metrics exist once it is built; a refusal before that is not counted.
  const refused = (reason: RefusalReason) => app?.metrics.refusals.inc({ reason });
  const trust = proxyTrust(config.trustProxy);
  const table = connectionTable(server, {
    maxPerAddress: maxConnectionsPerIp,
    maxProxyConnections,
    isTrustedProxy: (address) => isTrustedPeer(trust, address),
    onRefused: () => refused('connections_per_ip'),
  });
  server.on(
    'clientError',
    answerUnreadableRequest(table, {
      maxHeaderBytes: maxHeaderSize,
      requestTimeoutMs: requestTimeoutSeconds * 1000,
      onTimedOut: () => refused('request_timeout'),
    }),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const publicUrl = config.port === 0 ? config.publicUrl.replace(/:0$/, `:${port}`) : config.publicUrl;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;

  let app: App | undefined;
  try {
    app = await createApp({
      config: { ...config, publicUrl },
      db,
      logger,
      ...(redis ? { redis } : {}),
      ...(opts.webhookNetwork ? { webhookNetwork: opts.webhookNetwork } : {}),
    });
  } catch (error) {
    server.close();
    if (redis) await closeRedis(redis);
    await closeDb();
    stopRedisSpans();
    await stopTracing();
    throw error;
  }
  let metricsServer: Awaited<ReturnType<typeof serveMetrics>> | undefined;
  if (config.metricsPort !== null) {
    try {
      metricsServer = await serveMetrics(app.metrics, config.host, config.metricsPort);
    } catch (error) {
      server.close();
      await app.close();
      if (redis) await closeRedis(redis);
      await closeDb();
      stopRedisSpans();
      await stopTracing();
      throw error;
    }
  }
  born.adopt(app.app);
  handler = app.app;
  server.on('upgrade', (req, socket: Socket, head) => {
    if (table.isRefused(socket)) return;
    if (req.headers.host === undefined) {
      socket.end(rawProblem('MALFORMED_REQUEST', 'An HTTP/1.1 request must carry a Host header.', req.url ?? '/'));
      return;
    }
    if (draining) {
      socket.end(rawProblem('SERVICE_UNAVAILABLE', DRAINING, req.url ?? '/', RETRY_LATER));
      return;
    }
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/graphql') return void socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
    table.upgrade(socket);
    app.websockets.handleUpgrade(req, socket, head);
  });

  let closing: Promise<void> | null = null;
  return {
    url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
    publicUrl,
    ...(metricsServer ? { metricsUrl: metricsServer.url } : {}),
    app,
    close() {
      closing ??= (async () => {
        app.startDraining();
        // Still serving, but /readyz says 503: the balancer takes this replica out before its socket closes.
        if (config.drainDelaySeconds > 0) {
          logger.info({ seconds: config.drainDelaySeconds }, 'not ready; waiting for the balancer to stop sending');
          await new Promise((resolve) => setTimeout(resolve, config.drainDelaySeconds * 1000));
        }
        draining = true;
        openBefore = new Set(table.connections.keys());
        // Each response still to be written ends its connection, and so does each request read from now on.
        for (const { current } of table.connections.values()) {
          if (current && !current.res.headersSent) current.res.shouldKeepAlive = false;
        }
        // Upgraded sockets are no longer the HTTP server's: subscribers are told we are going away (1001).
        await app.websockets.close();
        // SSE streams never end by themselves; ended now, their clients resume elsewhere with Last-Event-ID.
        app.endStreams();
        const { cut } = await drainConnections(server, table, {
          timeoutMs: DRAIN_TIMEOUT_MS,
          onListenerClosed: () => logger.info('listener closed: new connections are refused, open ones are served'),
        });
        if (cut > 0) {
          logger.warn(
            { connections: cut, seconds: DRAIN_TIMEOUT_MS / 1000 },
            'requests still open after the drain timeout; their connections were closed',
          );
        }
        await app.close();
        await metricsServer?.close();
        if (redis) await closeRedis(redis);
        await closeDb();
        // Last: what the drain still traced is exported before the process exits.
        stopRedisSpans();
        await stopTracing();
      })();
      return closing;
    },
  };
}

const DRAINING = 'This replica is shutting down; send the request again (elsewhere).';

/** The methods a balancer sends again to another replica on a 503 (nginx: all but POST, LOCK and PATCH). */
const RETRIED = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** A request for a server-sent event stream (graphql-sse): its path is /graphql/stream. */
const isStreamRequest = (req: IncomingMessage) => /^\/graphql\/stream(?:[/?]|$)/.test(req.url ?? '');

/**
 * A request refused once the drain has begun: 503 with Retry-After, and its connection closes. The body is read (and
 * dropped) first, as the idle and total bounds allow: closing with a body still arriving would reset the connection
 * before the client reads the answer.
 */
function refuseWhileDraining(req: IncomingMessage, res: ServerResponse): void {
  res.shouldKeepAlive = false;
  req.once('end', () => sendEarlyProblem(req, res, 'SERVICE_UNAVAILABLE', DRAINING, RETRY_LATER));
  req.resume();
}
