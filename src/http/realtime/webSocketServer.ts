import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { CloseCode, handleProtocols, makeServer, type Context as WsContext } from 'graphql-ws';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Authentication, SessionLookup } from '../../auth/credentials.js';
import type { Context } from '../../context.js';
import { ANONYMOUS, type Principal } from '../../domain/policy.js';
import { clientIp, isForeignOrigin, type ProxyTrust } from '../middleware/index.js';
import { requestAttributes } from '../observability/index.js';
import { tracing, type Parent } from '../../tracing.js';
import { clientError } from '../problems/index.js';
import { closeReasonFor, connectionCredential } from './connectionCredentials.js';
import { keepAlive } from './keepAlive.js';
import type { Member, SharedExecution } from './sharedExecution.js';
import { SocketMember } from './socketMember.js';
import { idleTimer, type Release, type StreamRegistry } from './streamRegistry.js';
import { BAD_EVENT_ID, isEventId, type SubscribePath, type Subscriber } from './subscribe.js';

const MAX_PAYLOAD_BYTES = 64 * 1024;

/** WebSocket close codes: graphql-ws's own where the protocol has one, RFC 6455's otherwise. */
const CLOSE = {
  /** A credential refused, expired or ended: graphql-ws's client retries this one, with fresh connectionParams. */
  forbidden: CloseCode.Forbidden,
  policy: 1008,
  goingAway: 1001,
  /** RFC 6455 §7.4.1 (IANA): try again later; graphql-ws's client reconnects on it. */
  tryAgainLater: 1013,
  idle: 1000,
} as const;

/**
 * What graphql-ws keeps of a connection for its hooks. The upgrade request is let go once `connection_init` has
 * been read (its cookie and client address), so a connection does not hold its headers for its lifetime.
 */
interface Extra {
  readonly socket: WebSocket;
  request?: IncomingMessage;
}

/**
 * With tracing on, the upgrade's own span (`GET /graphql`, 101) continues the handshake's `traceparent`; the
 * connection's operations hang under it unless `connection_init` names a trace of its own.
 */
function traceUpgrade(req: IncomingMessage, handshake: (done: () => Parent | undefined) => void) {
  const span = tracing.start('GET /graphql', {
    kind: 'server',
    root: true,
    parent: tracing.extract(req.headers),
    attributes: { ...requestAttributes(req, '/graphql', 'http'), 'http.route': '/graphql' },
  });
  tracing.with(span, () =>
    handshake(() => {
      span?.setAttribute('http.response.status_code', 101);
      span?.end();
      return tracing.current();
    }),
  );
}

interface ConnectionState {
  principal: Principal;
  /** The client's address, as the rate budget sees it. */
  ip: string | undefined;
  requestId: string;
  log?: Logger;
  /** Each operation's hold on a slot, by operation id; released once whichever way it ends. */
  slots: Map<string, Release>;
  idle: ReturnType<typeof idleTimer>;
  unbindSession?: Release;
  /** The trace its operations continue: `connection_init`'s traceparent, else the upgrade request's span. */
  parent?: Parent;
  unbindCaller?: Release;
}

/**
 * GraphQL subscriptions over WebSocket (the graphql-ws protocol) on /graphql. Credentials come in
 * `connection_init` (`{ "authorization": "Bearer …" }`) or as the browser session cookie; refused
 * ones close with 4403, as do expired ones. Each connection and each principal hold a bounded number of subscriptions.
 */
export function createWebSocketServer(deps: {
  /** The one subscribe path, shared with the SSE transport. */
  subscriptions: SubscribePath;
  sharedExecution: SharedExecution;
  /** The one authentication; browser sessions' cookie authenticates a handshake too. */
  auth: Authentication<SessionLookup>;
  logger: Logger;
  /** Origins a cookie-bearing handshake may come from. */
  trustedOrigins: ReadonlySet<string>;
  /** Open streams of this replica: per-IP and per-user bounds, and the sessions behind them. */
  streams: StreamRegistry;
  /** TRUST_PROXY: whose X-Forwarded-For names the client that the per-address bound counts. */
  trust: ProxyTrust;
}) {
  const { subscriptions, auth, logger, streams } = deps;
  const { limits } = streams;
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD_BYTES });
  const states = new WeakMap<object, ConnectionState>();
  /** The TCP socket under each WebSocket. */
  const sockets = new WeakMap<WebSocket, Duplex>();
  /** With tracing on, the context of each WebSocket's upgrade span. */
  const upgrades = new WeakMap<WebSocket, Parent>();

  /** Writes a shared result as a graphql-ws `next` message: only the operation id and the cost are its own. */
  const memberOf = (socket: WebSocket, state: ConnectionState, id: string, context: Context): Member => {
    const before = Buffer.from(`{"id":${JSON.stringify(id)},"type":"next","payload":`);
    const after = Buffer.from(`${subscriptions.tailOf(context)}}`);
    const raw = sockets.get(socket);
    // Without a compression extension ws writes every frame to the TCP socket as it is sent, so a whole frame
    // written there directly cannot land inside another.
    const direct = raw && socket.extensions === '' ? raw : undefined;
    return new SocketMember(socket, direct, state.slots, before, after, deps.sharedExecution);
  };

  const release = (state: ConnectionState | undefined, id: string) => {
    if (!state) return;
    state.slots.get(id)?.();
    state.slots.delete(id);
    if (!state.slots.size) state.idle.idle();
  };

  /** One operation of a connection, as the subscribe path sees it. */
  const subscriberOf = (ctx: WsContext<Record<string, unknown>, Extra>, after?: string): Subscriber => {
    const state = states.get(ctx.extra)!;
    const socket: WebSocket = ctx.extra.socket;
    return {
      principal: state.principal,
      requestId: state.requestId,
      // One child logger per connection: its operations share the connection's request id.
      log: () => (state.log ??= logger.child({ reqId: state.requestId })),
      ip: state.ip,
      end: (why, message) => socket.close(why === 'expired' ? CLOSE.forbidden : CLOSE.policy, message.slice(0, 120)),
      ...(state.parent ? { parent: state.parent } : {}),
      ...(after !== undefined ? { after } : {}),
    };
  };

  const server = makeServer<Record<string, unknown>, Extra>({
    subscribe: subscriptions.subscribe,
    connectionInitWaitTimeout: limits.wsInitTimeoutSeconds * 1000,
    async onConnect(ctx) {
      const socket: WebSocket = ctx.extra.socket;
      const request = ctx.extra.request!;
      delete ctx.extra.request;
      const credential = connectionCredential(ctx.connectionParams, request.headers.cookie, auth.session.cookieName);
      if (credential && 'refused' in credential) {
        socket.close(CloseCode.BadRequest, credential.refused);
        return false;
      }
      const state: ConnectionState = {
        ...(tracing.enabled ? { parent: tracing.extract(ctx.connectionParams ?? {}) ?? upgrades.get(socket) } : {}),
        principal: ANONYMOUS,
        // Behind a balancer the budget follows the client address the proxy reports, as on HTTP.
        ip: clientIp(request, deps.trust),
        requestId: randomUUID(),
        slots: new Map(),
        idle: idleTimer(limits.wsIdleTimeoutSeconds * 1000, () => socket.close(CLOSE.idle, 'Idle timeout')),
      };
      states.set(ctx.extra, state);
      state.idle.idle();
      if (credential === undefined) return true;
      let caller;
      try {
        caller = await auth.callerOf(credential);
      } catch (error) {
        const refusal = auth.refusalOf(error);
        if (credential.kind === 'session') {
          // The session store's own failure is not a verdict on the session.
          if (refusal.reason === 'unverifiable') throw refusal.error;
          // Gone while the session was looked up: onClose has run, so nothing may be bound to it any more.
          if (socket.readyState !== socket.OPEN) return false;
        } else if (refusal.reason === 'unverifiable') {
          logger.error({ err: refusal.error }, 'token verification failed');
        }
        socket.close(...closeReasonFor(refusal));
        return false;
      }
      if (socket.readyState !== socket.OPEN) return false;
      state.principal = caller;
      // A deactivation or a change of roles at the directory ends the connection: its subscriptions were
      // authorised for the caller as they were.
      state.unbindCaller = streams.bindCaller(caller, (reason) => socket.close(CLOSE.forbidden, reason.slice(0, 120)));
      if (credential.kind === 'session') {
        state.unbindSession = streams.bindSession(credential.id, (reason) =>
          socket.close(CLOSE.forbidden, reason.slice(0, 120)),
        );
        return true;
      }
      // graphql-ws keeps the connection parameters for the socket's lifetime; the credential is not needed again.
      const params = ctx.connectionParams as Record<string, unknown>;
      delete params.authorization;
      delete params.Authorization;
      delete params.token;
      return true;
    },
    async onSubscribe(ctx, id, payload) {
      const state = states.get(ctx.extra)!;
      // A resumed subscription (as SSE's Last-Event-ID): the events after this id first, then live ones.
      const after = payload.extensions?.lastEventId;
      if (after !== undefined && (typeof after !== 'string' || !isEventId(after)))
        return [clientError(`extensions.lastEventId ${BAD_EVENT_ID}`, 'BAD_REQUEST')];
      // The slot is taken here, before any await, so a burst of subscribe messages cannot overshoot.
      const slot =
        state.slots.size >= limits.wsMaxSubscriptionsPerSocket
          ? null
          : state.principal.kind === 'user'
            ? streams.takeUserSlot(state.principal.subject)
            : () => undefined;
      if (!slot) {
        return [
          clientError(
            `At most ${limits.wsMaxSubscriptionsPerSocket} subscriptions per connection and ` +
              `${limits.maxPerUser} streams (WebSocket subscriptions and SSE streams) per user.`,
            'TOO_MANY_SUBSCRIPTIONS',
          ),
        ];
      }
      state.slots.set(id, slot);
      state.idle.busy();
      const prepared = await subscriptions.prepare(payload, subscriberOf(ctx, after), {
        member: (context) => memberOf(ctx.extra.socket, state, id, context),
      });
      if (prepared.ok) return prepared.args;
      // A refused operation never runs, so its slot is given back now (onError would too; release is idempotent).
      release(state, id);
      return prepared.errors;
    },
    // graphql-ws reports a refused operation (validation, unknown operation) through onError without onComplete.
    onComplete: (ctx, id) => release(states.get(ctx.extra), id),
    onClose(ctx) {
      const state = states.get(ctx.extra);
      if (!state) return;
      state.unbindSession?.();
      state.unbindCaller?.();
      for (const slot of state.slots.values()) slot();
      state.slots.clear();
      state.idle.busy();
    },
    onNext(ctx, _id, _payload, args, result) {
      return subscriptions.formatOwn(result, args.contextValue as Context, (error) =>
        logger.error({ err: error, reqId: states.get(ctx.extra)?.requestId }, 'unexpected GraphQL error'),
      );
    },
    onError(ctx, id, _payload, errors) {
      release(states.get(ctx.extra), id);
      return subscriptions.formatErrors(errors);
    },
  });

  // graphql-ws's own `useServer` for `ws`, with one keep-alive timer for all connections instead of an interval per
  // socket, and errors in the JSON log instead of console.error stack traces.
  wss.options.handleProtocols = handleProtocols;
  const alive = keepAlive(limits.wsKeepAliveSeconds * 1000, (socket) => socket.terminate());
  wss.on('error', (err) => logger.error({ err }, 'WebSocket server error'));
  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    const extra: Extra = { socket, request };
    // A peer's protocol violation (a frame over maxPayload, bad UTF-8, a bad opcode): ws has already closed the
    // socket with the code for it (1009, 1007, 1002). The client's fault, so a one-line warning, no stack.
    socket.on('error', (err: Error & { code?: string }) =>
      logger.warn({ code: err.code, reqId: states.get(extra)?.requestId }, `WebSocket closed: ${err.message}`),
    );
    alive.add(socket);
    const closed = server.opened(
      {
        protocol: socket.protocol,
        send: (data) =>
          new Promise<void>((resolve, reject) => {
            if (socket.readyState !== socket.OPEN) return resolve();
            socket.send(data, (err) => (err ? reject(err) : resolve()));
          }),
        close: (code, reason) => socket.close(code, reason),
        onMessage: (cb) =>
          socket.on('message', (data: Buffer) => {
            cb(String(data)).catch((err: unknown) => {
              logger.error({ err, reqId: states.get(extra)?.requestId }, 'WebSocket message handling failed');
              socket.close(CloseCode.InternalServerError, 'Internal server error');
            });
          }),
      },
      extra,
    );
    socket.once('close', (code: number, reason: Buffer) => {
      alive.delete(socket);
      closed(code, String(reason)).catch((err: unknown) =>
        logger.error({ err, reqId: states.get(extra)?.requestId }, 'closing a WebSocket connection failed'),
      );
    });
  });

  return {
    /** For the HTTP server's `upgrade` event. */
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer) {
      // Cross-site WebSocket hijacking: browsers attach cookies to any site's handshake, but say whose page asks.
      if (req.headers.cookie && isForeignOrigin(req.headers.origin, deps.trustedOrigins)) {
        socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const admitted = streams.admitSocket(clientIp(req, deps.trust));
      if (!admitted) {
        socket.end('HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      socket.once('close', admitted);
      const place = streams.takeReplicaSlot();
      if (place) socket.once('close', place);
      const handshake = (done?: () => Parent | undefined) =>
        wss.handleUpgrade(req, socket, head, (ws) => {
          // Past STREAMS_MAX_PER_REPLICA: a close code a WebSocket client reads and retries on, not a bare status.
          if (!place) return ws.close(CLOSE.tryAgainLater, 'This replica holds as many streams as it may; retry.');
          sockets.set(ws, socket);
          const parent = done?.();
          if (parent) upgrades.set(ws, parent);
          wss.emit('connection', ws, req);
        });
      if (tracing.enabled) traceUpgrade(req, handshake);
      else handshake();
    },
    /** Shutdown: every client is told the server is going away (1001). */
    async close() {
      alive.stop();
      for (const client of wss.clients) client.close(CLOSE.goingAway, 'Server shutting down');
      wss.removeAllListeners();
      await new Promise<void>((resolve, reject) => wss.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
