import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { CloseCode, type Context as WsContext } from 'graphql-ws';
import { useServer, type Extra } from 'graphql-ws/use/ws';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { BoundTokenError, InvalidTokenError, type TokenVerifier } from '../auth/bearer.js';
import { createContext, type Context } from '../context.js';
import { ANONYMOUS, type Principal } from '../domain/policy.js';
import type { Services } from '../domain/services.js';
import type { AuthenticateOptions } from './authenticate.js';
import { isForeignOrigin, readCookie } from './cookies.js';
import { clientError } from './graphqlErrors.js';
import {
  pendingWrites,
  SUBSCRIBER_BUFFER_BYTES,
  tailOf,
  textFrame,
  type Fanout,
  type Member,
  type Ticket,
} from './fanout.js';
import type { Pipeline } from './pipeline.js';
import { clientIp, idleTimer, type Release, type StreamRegistry } from './streams.js';

const MAX_PAYLOAD_BYTES = 64 * 1024;

/** WebSocket close codes: graphql-ws's own where the protocol has one, RFC 6455's otherwise. */
const CLOSE = {
  unauthorized: CloseCode.Unauthorized,
  sessionEnded: CloseCode.Forbidden,
  policy: 1008,
  goingAway: 1001,
  idle: 1000,
} as const;

interface ConnectionState {
  principal: Principal;
  requestId: string;
  log?: Logger;
  /** Each operation's hold on a slot, by operation id; released once whichever way it ends. */
  slots: Map<string, Release>;
  idle: ReturnType<typeof idleTimer>;
  unbindSession?: Release;
}

const ACCEPTED_PARAMS = 'send { "authorization": "Bearer <token>" } or nothing';

/**
 * The access token in `connection_init`'s payload: `authorization` (or `Authorization`), "Bearer " optional. A
 * payload in any other shape (`{ token }`, `{ headers: { Authorization } }`) is refused with the accepted one named,
 * rather than silently taken for an anonymous connection.
 */
function bearerFrom(params: Record<string, unknown> | null | undefined): { token?: string } | { refused: string } {
  const keys = Object.keys(params ?? {});
  const unknown = keys.find((key) => key !== 'authorization' && key !== 'Authorization');
  if (unknown !== undefined) {
    // A close reason is at most 123 bytes: the key is shown shortened and in ASCII.
    const shown = unknown.replace(/[^\w.-]/g, '?').slice(0, 24);
    return { refused: `Bad connectionParams: unknown key "${shown}"; ${ACCEPTED_PARAMS}` };
  }
  if (keys.length > 1)
    return { refused: `Bad connectionParams: both authorization and Authorization; ${ACCEPTED_PARAMS}` };
  if (!keys.length) return {};
  const value = params![keys[0]!];
  if (typeof value !== 'string')
    return { refused: `Bad connectionParams: authorization is not a string; ${ACCEPTED_PARAMS}` };
  return { token: value.replace(/^Bearer +/i, '') };
}

/**
 * GraphQL subscriptions over WebSocket (the graphql-ws protocol) on /graphql. Credentials come in
 * `connection_init` (`{ "authorization": "Bearer …" }`) or as the browser session cookie; refused
 * ones close with 4401. Each connection and each principal hold a bounded number of subscriptions.
 */
export function createWebSocketServer(deps: {
  pipeline: Pipeline;
  /** Shared execution of subscriptions, with the SSE transport. */
  fanout: Fanout;
  services: Services;
  verifier: TokenVerifier;
  logger: Logger;
  /** Browser sessions: their cookie authenticates a handshake too. */
  session: NonNullable<AuthenticateOptions['session']>;
  /** Origins a cookie-bearing handshake may come from. */
  trustedOrigins: ReadonlySet<string>;
  /** Open streams of this replica: per-IP and per-user bounds, and the sessions behind them. */
  streams: StreamRegistry;
  trustProxy: boolean | number;
}) {
  const { services, verifier, logger, streams, pipeline } = deps;
  const { limits } = streams;
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD_BYTES });
  const states = new WeakMap<object, ConnectionState>();
  /** Operations admitted to shared execution, by their context: the ticket and how to write to the socket. */
  const sharing = new WeakMap<Context, { ticket: Ticket; member: Member }>();
  /** The TCP socket under each WebSocket. */
  const sockets = new WeakMap<WebSocket, Duplex>();

  /** Writes a shared result as a graphql-ws `next` message: only the operation id and the cost are its own. */
  const memberOf = (socket: WebSocket, state: ConnectionState, id: string, context: Context): Member => {
    const before = Buffer.from(`{"id":${JSON.stringify(id)},"type":"next","payload":`);
    const after = Buffer.from(`${tailOf(pipeline.costOf(context))}}`);
    const writes = pendingWrites();
    const raw = sockets.get(socket);
    // Without a compression extension ws writes every frame to the TCP socket as it is sent, so a whole frame
    // written there directly cannot land inside another. Corked, a connection's messages of one slice of the
    // fan-out leave in one system call.
    const direct = raw && socket.extensions === '' ? raw : undefined;
    return {
      write(head) {
        if (socket.readyState !== socket.OPEN) return;
        writes.sent();
        if (direct) {
          // A connection with one operation has nothing to batch; corking would only delay and buffer its write.
          if (state.slots.size > 1) deps.fanout.cork(direct);
          direct.write(textFrame(before, head.bytes, after), writes.done);
        } else {
          socket.send(Buffer.concat([before, head.bytes, after]), { binary: false }, writes.done);
        }
      },
      backedUp: () => writes.tooMany() || socket.bufferedAmount > SUBSCRIBER_BUFFER_BYTES,
      cutOff: (reason) => socket.close(CLOSE.policy, reason.slice(0, 120)),
    };
  };

  const release = (state: ConnectionState | undefined, id: string) => {
    if (!state) return;
    state.slots.get(id)?.();
    state.slots.delete(id);
    if (!state.slots.size) state.idle.idle();
  };

  const contextFor = (ctx: WsContext<Record<string, unknown>, Extra>) => {
    const state = states.get(ctx.extra)!;
    const socket: WebSocket = ctx.extra.socket;
    // One child logger per connection: its operations share the connection's request id.
    const log = (state.log ??= logger.child({ reqId: state.requestId }));
    const context: Context = createContext(services, state.principal, state.requestId, log, {
      onEnd: (why, message) => {
        if (why === 'overflow') deps.fanout.countTooSlow();
        socket.close(why === 'expired' ? CLOSE.unauthorized : CLOSE.policy, message.slice(0, 120));
      },
      ...(state.principal.kind === 'user' && state.principal.expiresAt ? { expiresAt: state.principal.expiresAt } : {}),
      join: (feed) => {
        const shared = sharing.get(context);
        sharing.delete(context);
        return shared && deps.fanout.join(shared.ticket, feed, shared.member, context);
      },
    });
    // Behind a balancer the budget follows the client address the proxy reports, as on HTTP.
    return pipeline.identify(context, clientIp(ctx.extra.request, deps.trustProxy));
  };

  const server = useServer<Record<string, unknown>, { state?: ConnectionState }>(
    {
      connectionInitWaitTimeout: limits.wsInitTimeoutSeconds * 1000,
      async onConnect(ctx) {
        const socket: WebSocket = ctx.extra.socket;
        const params = bearerFrom(ctx.connectionParams);
        if ('refused' in params) {
          socket.close(CloseCode.BadRequest, params.refused);
          return false;
        }
        const { token } = params;
        const state: ConnectionState = {
          principal: ANONYMOUS,
          requestId: randomUUID(),
          slots: new Map(),
          idle: idleTimer(limits.wsIdleTimeoutSeconds * 1000, () => socket.close(CLOSE.idle, 'Idle timeout')),
        };
        states.set(ctx.extra, state);
        state.idle.idle();
        if (token === undefined) {
          const sessionId = readCookie(ctx.extra.request.headers.cookie, deps.session.cookieName);
          if (sessionId === undefined) return true;
          const user = await deps.session.lookup(sessionId);
          // Gone while the session was looked up: onClose has run, so nothing may be bound to it any more.
          if (socket.readyState !== socket.OPEN) return false;
          if (!user) {
            ctx.extra.socket.close(CLOSE.unauthorized, 'Unauthorized: the session has ended; sign in again');
            return false;
          }
          state.principal = user;
          state.unbindSession = streams.bindSession(sessionId, (reason) =>
            socket.close(CLOSE.sessionEnded, reason.slice(0, 120)),
          );
          return true;
        }
        try {
          state.principal = await verifier.verify(token);
          // graphql-ws keeps the connection parameters for the socket's lifetime; the credential is not needed again.
          const params = ctx.connectionParams as Record<string, unknown>;
          delete params.authorization;
          delete params.Authorization;
          delete params.token;
          return true;
        } catch (error) {
          if (!(error instanceof InvalidTokenError)) logger.error({ err: error }, 'token verification failed');
          ctx.extra.socket.close(
            CLOSE.unauthorized,
            error instanceof BoundTokenError
              ? 'Unauthorized: DPoP-bound access tokens are not accepted over WebSocket; use a Bearer token'
              : 'Unauthorized: the access token is not valid',
          );
          return false;
        }
      },
      async onSubscribe(ctx, id, payload) {
        const state = states.get(ctx.extra)!;
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
        const context = contextFor(ctx);
        const prepared = await pipeline.prepare(payload, context);
        if (prepared.ok) {
          const ticket = deps.fanout.admit(prepared.args);
          if (!ticket) return prepared.args;
          sharing.set(context, { ticket, member: memberOf(ctx.extra.socket, state, id, context) });
          return ticket.args;
        }
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
        for (const slot of state.slots.values()) slot();
        state.slots.clear();
        state.idle.busy();
      },
      onNext(ctx, _id, _payload, args, result) {
        if ((args.contextValue as Context).eventId) deps.fanout.countOwn();
        return pipeline.formatResult(result, args.contextValue as Context, (error) =>
          logger.error({ err: error, reqId: states.get(ctx.extra)?.requestId }, 'unexpected GraphQL error'),
        );
      },
      onError(ctx, id, _payload, errors) {
        release(states.get(ctx.extra), id);
        return pipeline.formatErrors(errors);
      },
    },
    wss,
    limits.wsKeepAliveSeconds * 1000,
  );

  return {
    /** For the HTTP server's `upgrade` event. */
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer) {
      // Cross-site WebSocket hijacking: browsers attach cookies to any site's handshake, but say whose page asks.
      if (req.headers.cookie && isForeignOrigin(req.headers.origin, deps.trustedOrigins)) {
        socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const admitted = streams.admitSocket(clientIp(req, deps.trustProxy));
      if (!admitted) {
        socket.end('HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      socket.once('close', admitted);
      wss.handleUpgrade(req, socket, head, (ws) => {
        sockets.set(ws, socket);
        wss.emit('connection', ws, req);
      });
    },
    /** Shutdown: every client is told the server is going away (1001). */
    async close() {
      for (const client of wss.clients) client.close(CLOSE.goingAway, 'Server shutting down');
      await server.dispose();
    },
  };
}
