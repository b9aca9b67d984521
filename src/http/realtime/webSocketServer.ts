import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { createSourceEventStream, subscribe, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { CloseCode, handleProtocols, makeServer, type Context as WsContext } from 'graphql-ws';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { BoundTokenError, InvalidTokenError, type TokenVerifier } from '../../auth/bearer.js';
import { createContext, type Context } from '../../context.js';
import { ANONYMOUS, type Principal } from '../../domain/policy.js';
import { SUBSCRIBER_BUFFER } from '../../domain/subscriptions.js';
import type { Services } from '../../domain/services.js';
import type { AuthenticateOptions } from '../middleware/authenticate.js';
import { isForeignOrigin, readCookie } from '../middleware/cookies.js';
import { clientError } from '../problems/graphqlErrors.js';
import {
  SUBSCRIBER_BUFFER_BYTES,
  tailOf,
  textFrame,
  type Fanout,
  type Head,
  type Member,
  type Ticket,
} from './sharedExecution.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import { clientIp, idleTimer, type Release, type StreamRegistry } from './streamRegistry.js';

const MAX_PAYLOAD_BYTES = 64 * 1024;
/** The connections are pinged in this many turns spread over the period, so no turn pings them all at once. */
const KEEPALIVE_TURNS = 10;

/** WebSocket close codes: graphql-ws's own where the protocol has one, RFC 6455's otherwise. */
const CLOSE = {
  unauthorized: CloseCode.Unauthorized,
  sessionEnded: CloseCode.Forbidden,
  policy: 1008,
  goingAway: 1001,
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
}

/**
 * The keep-alive of every connection with one timer: connection i is pinged in turn i % KEEPALIVE_TURNS, and
 * terminated at its next turn if no pong came back. One shared `pong` listener, no timer or closure per socket.
 * Each connection is pinged once per `periodMs` (WS_KEEPALIVE_S) and closed if it has not answered the previous ping
 * by then: a dead peer is found within two periods; an idle proxy (nginx's proxy_read_timeout, deploy/nginx.conf)
 * sees traffic.
 */
function keepAlive(periodMs: number, onDead: (socket: WebSocket) => void) {
  const turns = Array.from({ length: KEEPALIVE_TURNS }, () => new Set<WebSocket>());
  /** Sockets pinged that have not answered yet. */
  const waiting = new WeakSet<WebSocket>();
  function answered(this: WebSocket) {
    waiting.delete(this);
  }
  let added = 0;
  let turn = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    for (const socket of turns[turn]!) {
      if (socket.readyState !== socket.OPEN) continue;
      if (waiting.has(socket)) onDead(socket);
      else {
        waiting.add(socket);
        socket.ping();
      }
    }
    turn = (turn + 1) % KEEPALIVE_TURNS;
  };
  return {
    add(socket: WebSocket) {
      turns[added++ % KEEPALIVE_TURNS]!.add(socket);
      socket.on('pong', answered);
      if (!timer) {
        timer = setInterval(tick, periodMs / KEEPALIVE_TURNS);
        timer.unref();
      }
    },
    delete(socket: WebSocket) {
      for (const set of turns) set.delete(socket);
    },
    stop: () => clearInterval(timer),
  };
}

/** A WebSocket subscriber of a shared execution: one object and one write callback per subscriber. */
class SocketMember implements Member {
  /** Writes handed to the socket and not yet taken by the network. */
  private pending = 0;
  private readonly done = () => {
    this.pending -= 1;
  };

  constructor(
    private readonly socket: WebSocket,
    /** The TCP socket, when whole frames may be written to it directly. */
    private readonly direct: Duplex | undefined,
    /** The connection's operations. */
    private readonly slots: ReadonlyMap<string, unknown>,
    /** The message without the shared result, which goes in at `split`. */
    private readonly envelope: Buffer,
    private readonly split: number,
    private readonly fanout: Fanout,
  ) {}

  write(head: Head) {
    const { socket, direct } = this;
    if (socket.readyState !== socket.OPEN) return;
    this.pending += 1;
    if (direct) {
      // Corked, a connection's messages of one slice of the fan-out leave in one system call; a connection with
      // one operation has nothing to batch, and corking would only delay and buffer its write.
      if (this.slots.size > 1) this.fanout.cork(direct);
      direct.write(textFrame(this.envelope, this.split, head.bytes), this.done);
    } else {
      const message = Buffer.concat([
        this.envelope.subarray(0, this.split),
        head.bytes,
        this.envelope.subarray(this.split),
      ]);
      socket.send(message, { binary: false }, this.done);
    }
  }

  backedUp() {
    return this.pending > SUBSCRIBER_BUFFER || this.socket.bufferedAmount > SUBSCRIBER_BUFFER_BYTES;
  }

  cutOff(reason: string) {
    this.socket.close(CLOSE.policy, reason.slice(0, 120));
  }
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
  /** Contexts whose subscription joined a shared execution: their own event stream never yields. */
  const joined = new WeakSet<Context>();
  /** The TCP socket under each WebSocket. */
  const sockets = new WeakMap<WebSocket, Duplex>();

  /** Writes a shared result as a graphql-ws `next` message: only the operation id and the cost are its own. */
  const memberOf = (socket: WebSocket, state: ConnectionState, id: string, context: Context): Member => {
    const before = `{"id":${JSON.stringify(id)},"type":"next","payload":`;
    const envelope = Buffer.from(`${before}${tailOf(pipeline.costOf(context))}}`);
    const raw = sockets.get(socket);
    // Without a compression extension ws writes every frame to the TCP socket as it is sent, so a whole frame
    // written there directly cannot land inside another.
    const direct = raw && socket.extensions === '' ? raw : undefined;
    return new SocketMember(socket, direct, state.slots, envelope, Buffer.byteLength(before), deps.fanout);
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
    const log = () => (state.log ??= logger.child({ reqId: state.requestId }));
    const context: Context = createContext(services, state.principal, state.requestId, log, {
      onEnd: (why, message) => {
        if (why === 'overflow') deps.fanout.countTooSlow();
        socket.close(why === 'expired' ? CLOSE.unauthorized : CLOSE.policy, message.slice(0, 120));
      },
      ...(state.principal.kind === 'user' && state.principal.expiresAt ? { expiresAt: state.principal.expiresAt } : {}),
      join: (feed) => {
        const shared = sharing.get(context);
        sharing.delete(context);
        if (!shared) return undefined;
        joined.add(context);
        return deps.fanout.join(shared.ticket, feed, shared.member, context);
      },
    });
    return pipeline.identify(context, state.ip);
  };

  /**
   * graphql-js's `subscribe`, except for a subscription that joined a shared execution: its event stream is
   * returned as it is, without the mapping to results graphql-js wraps around it (closures, a generator and
   * promises per subscriber), since it never yields — the shared execution writes its results. The resolver and
   * every check in it run the same way either way.
   */
  const subscribeOrJoin = async (args: ExecutionArgs) => {
    const context = args.contextValue as Context;
    if (!sharing.has(context)) return subscribe(args);
    const source = (await createSourceEventStream(args)) as AsyncIterableIterator<ExecutionResult> | ExecutionResult;
    if (!(Symbol.asyncIterator in source) || joined.has(context)) return source;
    // A stream that did not join (no field of this schema does that today): run it the ordinary way.
    await source.return?.();
    return subscribe(args);
  };

  const server = makeServer<Record<string, unknown>, Extra>({
    subscribe: subscribeOrJoin,
    connectionInitWaitTimeout: limits.wsInitTimeoutSeconds * 1000,
    async onConnect(ctx) {
      const socket: WebSocket = ctx.extra.socket;
      const request = ctx.extra.request!;
      delete ctx.extra.request;
      const params = bearerFrom(ctx.connectionParams);
      if ('refused' in params) {
        socket.close(CloseCode.BadRequest, params.refused);
        return false;
      }
      const { token } = params;
      const state: ConnectionState = {
        principal: ANONYMOUS,
        // Behind a balancer the budget follows the client address the proxy reports, as on HTTP.
        ip: clientIp(request, deps.trustProxy),
        requestId: randomUUID(),
        slots: new Map(),
        idle: idleTimer(limits.wsIdleTimeoutSeconds * 1000, () => socket.close(CLOSE.idle, 'Idle timeout')),
      };
      states.set(ctx.extra, state);
      state.idle.idle();
      if (token === undefined) {
        const sessionId = readCookie(request.headers.cookie, deps.session.cookieName);
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
      alive.stop();
      for (const client of wss.clients) client.close(CLOSE.goingAway, 'Server shutting down');
      wss.removeAllListeners();
      await new Promise<void>((resolve, reject) => wss.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
