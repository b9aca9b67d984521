import { createServer, maxHeaderSize, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { createApp, type App } from './app.js';
import { serveMetrics, startTracing } from './http/observability/index.js';
import { PROBLEM_TYPES, problemBody, RETRY_LATER } from './http/problems/index.js';
import type { Config } from './config.js';
import type { Database } from './store/db.js';
import { openDatabase } from './store/open.js';
import { migrate } from './store/migrations.js';
import { closeRedis, openRedis } from './store/redis.js';
import { traceRedisCommands } from './store/redisSpans.js';
import { seed } from './store/seed.js';

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
  opts: { db?: Database } = {},
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
  const inFlight = new Set<ServerResponse>();
  // Node's own Host check answers a bare `400` with no body; the request handler answers it as problem details.
  const server = createServer({ requireHostHeader: false }, (req, res) => {
    // While draining, each response ends its connection so no idle keep-alive socket holds up the exit.
    if (draining) res.shouldKeepAlive = false;
    inFlight.add(res);
    res.on('close', () => inFlight.delete(res));
    // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without exactly one Host.
    if (req.httpVersion === '1.1' && req.headers.host === undefined) {
      res.shouldKeepAlive = false;
      return sendEarlyProblem(req, res, 'MALFORMED_REQUEST', 'An HTTP/1.1 request must carry a Host header.');
    }
    if (handler) return handler(req, res);
    sendEarlyProblem(req, res, 'SERVICE_UNAVAILABLE', 'Starting up.', RETRY_LATER);
  });
  server.on('clientError', answerUnreadableRequest);
  // Node counts a connection that has not sent a byte yet (a client's or a browser's preconnect) as busy, so
  // closeIdleConnections() leaves it open: shutdown closes those itself, or they would hold it until DRAIN_TIMEOUT_MS.
  const connections = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });
  // Behind a load balancer, idle keep-alive connections must outlive the balancer's own idle timeout.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const publicUrl = config.port === 0 ? config.publicUrl.replace(/:0$/, `:${port}`) : config.publicUrl;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;

  let app: App;
  try {
    app = await createApp({ config: { ...config, publicUrl }, db, logger, ...(redis ? { redis } : {}) });
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
  handler = app.app;
  server.on('upgrade', (req, socket, head) => {
    if (req.headers.host === undefined) {
      socket.end(rawProblem('MALFORMED_REQUEST', 'An HTTP/1.1 request must carry a Host header.', req.url ?? '/'));
      return;
    }
    const path = (req.url ?? '').split('?')[0];
    if (path === '/graphql' && !draining) return app.websockets.handleUpgrade(req, socket, head);
    socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
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
        for (const res of inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
        // Upgraded sockets are no longer the HTTP server's: subscribers are told we are going away (1001).
        await app.websockets.close();
        // SSE streams never end by themselves; ended now, their clients resume elsewhere with Last-Event-ID.
        app.endStreams();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        for (const socket of connections) if (socket.bytesRead === 0) socket.destroy();
        const timer = setTimeout(() => {
          logger.warn(
            { connections: connections.size, seconds: DRAIN_TIMEOUT_MS / 1000 },
            'requests still open after the drain timeout; closing their connections',
          );
          server.closeAllConnections();
        }, DRAIN_TIMEOUT_MS);
        await closed;
        clearTimeout(timer);
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

/** Problem details written before (or without) the Express app: starting up, or no Host. */
function sendEarlyProblem(
  req: IncomingMessage,
  res: ServerResponse,
  code: 'SERVICE_UNAVAILABLE' | 'MALFORMED_REQUEST',
  detail: string,
  headers: Readonly<Record<string, string>> = {},
) {
  const body = JSON.stringify(problemBody(code, detail, req.url ?? '/'));
  res.writeHead(PROBLEM_TYPES[code].status, PROBLEM_TYPES[code].title, {
    'Content-Type': 'application/problem+json',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    ...headers,
  });
  res.end(body);
}

/** The request target of the packet Node's parser failed on, when it starts with one (`GET /path HTTP/1.1`). */
function requestTarget(error: { rawPacket?: unknown }): string {
  const packet = Buffer.isBuffer(error.rawPacket) ? error.rawPacket.subarray(0, 4096).toString('latin1') : '';
  return /^[A-Z]{1,20} (\/[\x21-\x7e]*) HTTP\/1\.[01]\r\n/.exec(packet)?.[1] ?? '/';
}

/**
 * A request Node's parser gave up on never reaches Express: without this, Node answers with a bare status line.
 * Headers over Node's limit (16 KB unless --max-http-header-size says otherwise) get 431 and anything else unreadable 400, as problem details like every other
 * error; a request that timed out keeps Node's plain 408, and a socket already gone gets nothing.
 */
function answerUnreadableRequest(error: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
    return;
  }
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const code = tooLarge ? 'HEADERS_TOO_LARGE' : 'MALFORMED_REQUEST';
  const detail = tooLarge
    ? `The request line and headers exceed ${maxHeaderSize / 1024} KB.`
    : 'The request could not be parsed as HTTP/1.1.';
  socket.end(rawProblem(code, detail, requestTarget(error)));
}

/** A whole HTTP/1.1 problem-details response as text, for a socket no ServerResponse owns; it closes. */
function rawProblem(code: 'HEADERS_TOO_LARGE' | 'MALFORMED_REQUEST', detail: string, instance: string): string {
  const { status, title } = PROBLEM_TYPES[code];
  const body = JSON.stringify(problemBody(code, detail, instance));
  return [
    `HTTP/1.1 ${status} ${title}`,
    'Content-Type: application/problem+json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Cache-Control: no-store',
    'X-Content-Type-Options: nosniff',
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}
