import express, { type NextFunction, type Request, type Response } from 'express';
import type { ExecutionResult } from 'graphql';
import { createHandler } from 'graphql-sse';
import type { Logger } from 'pino';
import type { TokenVerifier } from '../../auth/bearer.js';
import { createContext, type Context } from '../../context.js';
import type { Services } from '../../domain/services.js';
import { authenticate, type AuthenticateOptions } from '../middleware/authenticate.js';
import { graphqlClientErrors } from '../problems/unreadableRequests.js';
import { jsonBodyParser } from '../middleware/jsonBody.js';
import { refuseCookieCsrf } from '../middleware/cookieCsrf.js';
import {
  pendingWrites,
  SUBSCRIBER_BUFFER_BYTES,
  tailOf,
  type Fanout,
  type Member,
  type Ticket,
} from './sharedExecution.js';
import { graphqlAuthFailure, refuseForeignOrigins, sendGraphqlError } from '../graphql/envelope.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import { boundReservations } from './sseReservations.js';
import { holdSseStream, type StreamRegistry } from './streamRegistry.js';

const EVENT_ID = /^\d{1,19}$/;
/** Event ids are PostgreSQL bigints; anything past the largest one is as malformed as letters. */
const isEventId = (value: string) => EVENT_ID.test(value) && BigInt(value) <= 2n ** 63n - 1n;

/**
 * A Last-Event-ID this API never sent cannot say where to resume: it is refused, not ignored (ignoring it would
 * silently resume from nothing).
 */
function refuseBadLastEventId(req: Request, res: Response, next: NextFunction) {
  const value = req.get('last-event-id');
  // An empty one is what EventSource sends before it has seen an id: none.
  if (value === undefined || value === '' || isEventId(value)) return next();
  sendGraphqlError(
    req,
    res,
    'Last-Event-ID must be the id of an event this stream sent (a decimal integer up to 9223372036854775807).',
    'BAD_REQUEST',
    { status: 400 },
  );
}

/**
 * Gives each `next` message the SSE `id:` of the event it reports (its `extensions.eventId`), so a
 * client that reconnects sends it back as Last-Event-ID.
 */
function withEventId(message: string): string {
  if (!message.startsWith('event: next\n')) return message;
  const data = /^data: (.*)$/m.exec(message)?.[1];
  if (!data) return message;
  const parsed = JSON.parse(data) as {
    extensions?: { eventId?: unknown };
    payload?: { extensions?: { eventId?: unknown } };
  };
  // Single-connection mode wraps each result in { id, payload }.
  const eventId = parsed.extensions?.eventId ?? parsed.payload?.extensions?.eventId;
  return typeof eventId === 'string' ? `id: ${eventId}\n${message}` : message;
}

/**
 * graphql-sse insists on a query text; a request that names a persisted document by hash or documentId
 * gets an empty one, which pipeline.prepare replaces with the document.
 */
function byReference(req: Request): { url: string; body: Record<string, unknown> | null } {
  const body = req.body as Record<string, unknown> | undefined;
  if (req.method !== 'GET') {
    const named = body && typeof body === 'object' && (body.documentId !== undefined || body.extensions !== undefined);
    return { url: req.originalUrl, body: named && body.query === undefined ? { ...body, query: '' } : (body ?? null) };
  }
  const url = new URL(req.originalUrl, 'http://x');
  const named = url.searchParams.has('documentId') || url.searchParams.has('extensions');
  // Anything else without a query (a single-connection stream's GET) is graphql-sse's to judge as it is.
  if (named && !url.searchParams.has('query')) url.searchParams.set('query', '');
  return { url: url.pathname + url.search, body: null };
}

/**
 * GraphQL over server-sent events (the graphql-sse protocol, both its distinct-connections and
 * single-connection modes) at /graphql/stream. Credentials: `Authorization: Bearer` or the
 * session cookie. In distinct-connections mode a `Last-Event-ID` header resumes a subscription:
 * the events missed since (kept 24 hours) come first, then live ones.
 */
export function createSseRouter(deps: {
  pipeline: Pipeline;
  /** Shared execution of subscriptions, with the WebSocket transport. */
  fanout: Fanout;
  services: Services;
  verifier: TokenVerifier;
  logger: Logger;
  session: NonNullable<AuthenticateOptions['session']>;
  trustedOrigins: ReadonlySet<string>;
  /** Open streams of this replica: per-IP and per-user bounds, and the sessions behind them. */
  streams: StreamRegistry;
}) {
  const { pipeline } = deps;
  /** How to cut off the stream a request holds, for a subscriber that is too slow or whose credential expired. */
  const enders = new WeakMap<Request, (reason: string) => void>();
  const open = new Set<(reason?: string) => void>();
  /** Streams admitted to shared execution, by their context: the ticket and how to write to the response. */
  const sharing = new WeakMap<Context, { ticket: Ticket; member: Member }>();
  /** What a shared stream was given before its response began, by request; written once it has. */
  const early = new WeakMap<Request, string[]>();

  /** Writes a shared result as an SSE `next` message: only the `id:` line and the cost are its own. */
  const memberOf = (raw: Request, context: Context): Member => {
    const res = raw.res!;
    const after = `${tailOf(pipeline.costOf(context))}\n\n`;
    const writes = pendingWrites();
    return {
      write(head, eventId) {
        const message = `id: ${eventId}\nevent: next\ndata: ${head.text}${after}`;
        if (!res.headersSent) {
          early.set(raw, [...(early.get(raw) ?? []), message]);
          return;
        }
        if (res.writableEnded) return;
        writes.sent();
        res.write(message, writes.done);
      },
      backedUp: () => writes.tooMany() || res.writableLength > SUBSCRIBER_BUFFER_BYTES,
      cutOff: (reason) => enders.get(raw)?.(reason),
    };
  };

  // graphql-sse wants a context indexable by any key; ours is a closed interface.
  type SseContext = Context & Record<PropertyKey, unknown>;
  const contextFor = (raw: Request) => {
    const principal = raw.res!.locals.principal;
    const lastEventId = raw.get('last-event-id');
    const context: Context = createContext(deps.services, principal, String(raw.id), () => raw.log, {
      onEnd: (why, message) => {
        if (why === 'overflow') deps.fanout.countTooSlow();
        enders.get(raw)?.(message);
      },
      ...(principal.kind === 'user' && principal.expiresAt ? { expiresAt: principal.expiresAt } : {}),
      ...(lastEventId !== undefined && isEventId(lastEventId) ? { after: lastEventId } : {}),
      join: (feed) => {
        const shared = sharing.get(context);
        sharing.delete(context);
        return shared && deps.fanout.join(shared.ticket, feed, shared.member, context);
      },
    });
    return pipeline.identify(context, raw.ip) as SseContext;
  };
  const handler = createHandler<Request, undefined, SseContext>({
    // pipeline.prepare has validated every document that reaches execution.
    validate: () => [],
    context: (req) => contextFor(req.raw),
    // A refused operation is answered as a result with its errors, streamed like any other.
    onSubscribe: async (req, params) => {
      const raw = req.raw;
      const documentId =
        raw.method === 'GET' ? raw.query.documentId : (raw.body as { documentId?: unknown })?.documentId;
      const context = contextFor(raw);
      const prepared = await pipeline.prepare({ ...params, documentId }, context, { method: raw.method });
      // graphql-sse recognises a result by its `data` key; a request error has none to send.
      if (!prepared.ok) return { data: undefined, errors: prepared.errors };
      // Only a distinct-connections stream is this request's own response; single-connection streams carry
      // several operations, each wrapped in its own envelope by graphql-sse, and are served per subscriber.
      const distinct = req.headers.get('accept') === 'text/event-stream';
      const ticket = distinct ? deps.fanout.admit(prepared.args) : undefined;
      if (!ticket) return prepared.args as never;
      sharing.set(context, { ticket, member: memberOf(raw, context) });
      return ticket.args as never;
    },
    onNext: (ctx, req, result) => {
      if (ctx.eventId) deps.fanout.countOwn();
      return pipeline.formatResult(result as ExecutionResult, ctx, (err) =>
        req.raw.log.error({ err }, 'unexpected GraphQL error'),
      ) as never;
    },
  });

  const bounded = boundReservations(handler, deps.streams);

  const router = express.Router();
  router.use(refuseCookieCsrf(deps.session.cookieName));
  router.use(refuseForeignOrigins(deps.trustedOrigins));
  router.use(authenticate(deps.verifier, graphqlAuthFailure, { session: deps.session }));
  router.use(jsonBodyParser({ limit: '64kb' }), graphqlClientErrors('64 kB'));
  router.use(refuseBadLastEventId);
  router.all('/', async (req: Request, res: Response) => {
    const [body, init] = await bounded({
      method: req.method,
      ...byReference(req),
      headers: { get: (key) => req.get(key) ?? null },
      raw: req,
      context: undefined,
    });
    if (body === null || typeof body === 'string') {
      res.writeHead(init.status, init.statusText, { ...init.headers, 'cache-control': 'no-store' });
      res.end(body ?? undefined);
      return;
    }
    let ended = false;
    const end = (reason?: string) => {
      if (ended) return;
      ended = true;
      open.delete(end);
      release?.();
      if (reason) res.write(`: closed: ${reason.replace(/\n/g, ' ')}\n\n`);
      void body.return();
      res.end();
    };
    const release = holdSseStream(deps.streams, req, res.locals.principal, deps.session.cookieName, end);
    if (!release) {
      void body.return();
      const { limits } = deps.streams;
      return sendGraphqlError(
        req,
        res,
        `At most ${limits.maxPerUser} streams (WebSocket subscriptions and SSE streams) per user, and ` +
          `${limits.sseAnonymousMaxPerIp} anonymous SSE streams per client address.`,
        'TOO_MANY_SUBSCRIPTIONS',
        { status: 429 },
      );
    }
    res.writeHead(init.status, init.statusText, { ...init.headers, 'cache-control': 'no-store' });
    for (const message of early.get(req) ?? []) res.write(message);
    early.delete(req);
    enders.set(req, end);
    open.add(end);
    // The response's close, not the request's: that one fires as soon as the body has been read.
    res.on('close', () => end());
    for await (const message of body) {
      if (ended) break;
      res.write(withEventId(message));
    }
    end();
  });

  return {
    router,
    /** Shutdown: every open stream ends cleanly, telling the client why. */
    close() {
      for (const end of [...open]) end('server shutting down');
    },
  };
}
