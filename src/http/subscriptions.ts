import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { GraphQLError } from 'graphql';
import { CloseCode, type Context as WsContext } from 'graphql-ws';
import { useServer, type Extra } from 'graphql-ws/use/ws';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { InvalidTokenError, type TokenVerifier } from '../auth/bearer.js';
import { createContext, type Context } from '../context.js';
import { ANONYMOUS, type Principal } from '../domain/policy.js';
import type { Services } from '../domain/services.js';
import type { AuthenticateOptions } from './authenticate.js';
import { isForeignOrigin, readCookie } from './cookies.js';
import type { Pipeline } from './pipeline.js';

export const LIMITS = { perConnection: 25, perPrincipal: 100, maxPayloadBytes: 64 * 1024 } as const;

/** WebSocket close codes: graphql-ws's own where the protocol has one, RFC 6455's otherwise. */
const CLOSE = { unauthorized: CloseCode.Unauthorized, policy: 1008, goingAway: 1001 } as const;

interface ConnectionState {
  principal: Principal;
  requestId: string;
  subscriptions: number;
}

function bearerFrom(params: Record<string, unknown> | undefined): string | undefined {
  const value = params?.authorization ?? params?.Authorization ?? params?.token;
  if (typeof value !== 'string') return undefined;
  return value.replace(/^Bearer +/i, '');
}

/**
 * GraphQL subscriptions over WebSocket (the graphql-ws protocol) on /graphql. Credentials come in
 * `connection_init` (`{ "authorization": "Bearer …" }`) or as the browser session cookie; refused
 * ones close with 4401. Each connection and each principal hold a bounded number of subscriptions.
 */
export function createWebSocketServer(deps: {
  pipeline: Pipeline;
  services: Services;
  verifier: TokenVerifier;
  logger: Logger;
  /** Browser sessions: their cookie authenticates a handshake too. */
  session: NonNullable<AuthenticateOptions['session']>;
  /** Origins a cookie-bearing handshake may come from. */
  trustedOrigins: ReadonlySet<string>;
}) {
  const { services, verifier, logger, pipeline } = deps;
  const wss = new WebSocketServer({ noServer: true, maxPayload: LIMITS.maxPayloadBytes });
  const states = new WeakMap<object, ConnectionState>();
  const perPrincipal = new Map<string, number>();

  const adjust = (state: ConnectionState, delta: number) => {
    state.subscriptions += delta;
    if (state.principal.kind !== 'user') return;
    const n = (perPrincipal.get(state.principal.subject) ?? 0) + delta;
    if (n > 0) perPrincipal.set(state.principal.subject, n);
    else perPrincipal.delete(state.principal.subject);
  };

  const contextFor = (ctx: WsContext<Record<string, unknown>, Extra>) => {
    const state = states.get(ctx.extra)!;
    const socket: WebSocket = ctx.extra.socket;
    const log = logger.child({ reqId: state.requestId });
    const context = createContext(services, state.principal, state.requestId, log, {
      onEnd: (why, message) =>
        socket.close(why === 'expired' ? CLOSE.unauthorized : CLOSE.policy, message.slice(0, 120)),
      ...(state.principal.kind === 'user' && state.principal.expiresAt ? { expiresAt: state.principal.expiresAt } : {}),
    });
    return pipeline.identify(context, ctx.extra.request.socket.remoteAddress);
  };

  const server = useServer<Record<string, unknown>, { state?: ConnectionState }>(
    {
      async onConnect(ctx) {
        const token = bearerFrom(ctx.connectionParams);
        const state: ConnectionState = { principal: ANONYMOUS, requestId: randomUUID(), subscriptions: 0 };
        states.set(ctx.extra, state);
        if (token === undefined) {
          const sessionId = readCookie(ctx.extra.request.headers.cookie, deps.session.cookieName);
          if (sessionId === undefined) return true;
          const user = await deps.session.lookup(sessionId);
          if (!user) {
            ctx.extra.socket.close(CLOSE.unauthorized, 'Unauthorized: the session has ended; sign in again');
            return false;
          }
          state.principal = user;
          return true;
        }
        try {
          state.principal = await verifier.verify(token);
          return true;
        } catch (error) {
          if (!(error instanceof InvalidTokenError)) logger.error({ err: error }, 'token verification failed');
          ctx.extra.socket.close(CLOSE.unauthorized, 'Unauthorized: the access token is not valid');
          return false;
        }
      },
      async onSubscribe(ctx, _id, payload) {
        const state = states.get(ctx.extra)!;
        const subject = state.principal.kind === 'user' ? state.principal.subject : '';
        if (state.subscriptions >= LIMITS.perConnection || (perPrincipal.get(subject) ?? 0) >= LIMITS.perPrincipal) {
          return [
            new GraphQLError(
              `At most ${LIMITS.perConnection} subscriptions per connection and ${LIMITS.perPrincipal} per user.`,
              { extensions: { code: 'TOO_MANY_SUBSCRIPTIONS' } },
            ),
          ];
        }
        // The slot is taken here, before any await, so a burst of subscribe messages cannot overshoot.
        adjust(state, 1);
        // graphql-ws calls onComplete only for operations that ran, so a refused one gives its slot back here.
        const prepared = await pipeline.prepare(payload, contextFor(ctx));
        if (prepared.ok) return prepared.args;
        adjust(state, -1);
        return prepared.errors;
      },
      onComplete(ctx) {
        const state = states.get(ctx.extra);
        if (state) adjust(state, -1);
      },
      onClose(ctx) {
        const state = states.get(ctx.extra);
        if (state && state.subscriptions) adjust(state, -state.subscriptions);
      },
      onNext(ctx, _id, _payload, args, result) {
        return pipeline.formatResult(result, args.contextValue as Context, (error) =>
          logger.error({ err: error, reqId: states.get(ctx.extra)?.requestId }, 'unexpected GraphQL error'),
        );
      },
      onError(_ctx, _id, _payload, errors) {
        return pipeline.formatErrors(errors);
      },
    },
    wss,
  );

  return {
    /** For the HTTP server's `upgrade` event. */
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer) {
      // Cross-site WebSocket hijacking: browsers attach cookies to any site's handshake, but say whose page asks.
      if (req.headers.cookie && isForeignOrigin(req.headers.origin, deps.trustedOrigins)) {
        socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
    },
    /** Shutdown: every client is told the server is going away (1001). */
    async close() {
      for (const client of wss.clients) client.close(CLOSE.goingAway, 'Server shutting down');
      await server.dispose();
    },
  };
}
