import express, { type NextFunction, type Request, type Response } from 'express';
import type { ExecutionResult } from 'graphql';
import { createHandler } from 'graphql-sse';
import type { Authentication, SessionLookup } from '../../auth/credentials.js';
import type { Context } from '../../context.js';
import {
  authenticate,
  graphqlAuthFailure,
  jsonBodyParser,
  refuseCookieCsrf,
  refuseForeignOrigins,
} from '../middleware/index.js';
import { refuseUnreadableGraphql, RETRY_LATER, sendGraphqlError, sendLibraryRefusal } from '../problems/index.js';
import { pendingWrites, SUBSCRIBER_BUFFER_BYTES, type Member } from './sharedExecution.js';
import { boundReservations } from './sseReservations.js';
import { holdSseStream, type StreamRegistry } from './streamRegistry.js';
import { BAD_EVENT_ID, isEventId, type SubscribePath, type Subscriber } from './subscribe.js';

/**
 * A Last-Event-ID this API never sent cannot say where to resume: it is refused, not ignored (ignoring it would
 * silently resume from nothing).
 */
function refuseBadLastEventId(req: Request, res: Response, next: NextFunction) {
  const value = req.get('last-event-id');
  // An empty one is what EventSource sends before it has seen an id: none.
  if (value === undefined || value === '' || isEventId(value)) return next();
  sendGraphqlError(req, res, `Last-Event-ID ${BAD_EVENT_ID}`, 'BAD_REQUEST');
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

/** What a bodiless refusal of graphql-sse's protocol means, by status. */
const PROTOCOL_REFUSALS: Readonly<Record<number, string>> = {
  404:
    'No such stream: send Accept: text/event-stream for a stream of its own, or the X-GraphQL-Event-Stream-Token ' +
    'of a stream reserved with PUT.',
  405: 'This method is not supported here; use GET, POST, PUT or DELETE.',
  406: 'Accept text/event-stream for a stream, text/plain to reserve one with PUT, or application/json to add an operation to one.',
  415: 'POST requests must send Content-Type: application/json.',
};

/** What the SSE route reads of a request's GraphQL parameters itself, handed to graphql-sse's hooks. */
interface Reference {
  /** graphql-codegen's trusted-document id, which graphql-sse does not know. */
  readonly documentId: unknown;
}

/**
 * The request as graphql-sse is to see it: graphql-sse insists on a query text, so a request that names a persisted
 * document by hash or documentId gets an empty one, which the pipeline replaces with the document. The query string
 * is read once, from Express's parse; graphql-sse reads its own parameters from the URL.
 */
function byReference(req: Request): { url: string; body: Record<string, unknown> | null; context: Reference } {
  const body = req.body as Record<string, unknown> | undefined;
  if (req.method !== 'GET') {
    const named = body && typeof body === 'object' && (body.documentId !== undefined || body.extensions !== undefined);
    return {
      url: req.originalUrl,
      body: named && body.query === undefined ? { ...body, query: '' } : (body ?? null),
      context: { documentId: body?.documentId },
    };
  }
  const q = req.query as Record<string, unknown>;
  const named = q.documentId !== undefined || q.extensions !== undefined;
  // Anything else without a query (a single-connection stream's GET) is graphql-sse's to judge as it is.
  const url =
    named && q.query === undefined
      ? `${req.originalUrl}${req.originalUrl.includes('?') ? '&' : '?'}query=`
      : req.originalUrl;
  return { url, body: null, context: { documentId: q.documentId } };
}

/**
 * GraphQL over server-sent events (the graphql-sse protocol, both its distinct-connections and
 * single-connection modes) at /graphql/stream. Credentials: `Authorization: Bearer` or the
 * session cookie. In distinct-connections mode a `Last-Event-ID` header resumes a subscription:
 * the events missed since (kept 24 hours) come first, then live ones.
 */
export function createSseRouter(deps: {
  /** The one subscribe path, shared with the WebSocket transport. */
  subscriptions: SubscribePath;
  /** The one authentication; browser sessions' cookie authenticates a stream too. */
  auth: Authentication<SessionLookup>;
  trustedOrigins: ReadonlySet<string>;
  /** Open streams of this replica: per-IP and per-user bounds, and the sessions behind them. */
  streams: StreamRegistry;
}) {
  const { subscriptions, auth } = deps;
  /** How to cut off the stream a request holds, for a subscriber that is too slow or whose credential expired. */
  const enders = new WeakMap<Request, (reason: string) => void>();
  const open = new Set<(reason?: string) => void>();
  /** What a shared stream was given before its response began, by request; written once it has. */
  const early = new WeakMap<Request, string[]>();

  /** Writes a shared result as an SSE `next` message: only the `id:` line and the cost are its own. */
  const memberOf = (raw: Request, context: Context): Member => {
    const res = raw.res!;
    const after = `${subscriptions.tailOf(context)}\n\n`;
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

  /** The stream's request, as the subscribe path sees its subscriber. */
  const subscriberOf = (raw: Request): Subscriber => {
    const lastEventId = raw.get('last-event-id');
    return {
      principal: raw.res!.locals.principal,
      requestId: String(raw.id),
      log: () => raw.log,
      ip: raw.ip,
      end: (_why, message) => enders.get(raw)?.(message),
      ...(lastEventId !== undefined && isEventId(lastEventId) ? { after: lastEventId } : {}),
    };
  };

  // graphql-sse wants a context indexable by any key; ours is a closed interface.
  type SseContext = Context & Record<PropertyKey, unknown>;
  const handler = createHandler<Request, Reference, SseContext>({
    // The pipeline has validated every document that reaches execution.
    validate: () => [],
    subscribe: subscriptions.subscribe,
    context: (req) => subscriptions.contextFor(subscriberOf(req.raw)) as SseContext,
    // A refused operation is answered as a result with its errors, streamed like any other.
    onSubscribe: async (req, params) => {
      const raw = req.raw;
      // Only a distinct-connections stream is this request's own response; single-connection streams carry
      // several operations, each wrapped in its own envelope by graphql-sse, and are served per subscriber.
      const distinct = req.headers.get('accept') === 'text/event-stream';
      const prepared = await subscriptions.prepare(
        { ...params, documentId: req.context.documentId },
        subscriberOf(raw),
        {
          method: raw.method,
          ...(distinct ? { member: (context: Context) => memberOf(raw, context) } : {}),
        },
      );
      // graphql-sse recognises a result by its `data` key; a request error has none to send.
      if (!prepared.ok) return { data: undefined, errors: prepared.errors };
      return prepared.args as never;
    },
    onNext: (ctx, req, result) =>
      subscriptions.formatOwn(result as ExecutionResult, ctx, (err) =>
        req.raw.log.error({ err }, 'unexpected GraphQL error'),
      ) as never,
  });

  const bounded = boundReservations(handler, deps.streams);

  const router = express.Router();
  router.use(refuseCookieCsrf(auth.session.cookieName));
  router.use(refuseForeignOrigins(deps.trustedOrigins));
  router.use(authenticate(auth, graphqlAuthFailure));
  router.use(jsonBodyParser({ limit: '64kb' }), refuseUnreadableGraphql('64 kB'));
  router.use(refuseBadLastEventId);
  router.all('/', async (req: Request, res: Response) => {
    const [body, init] = await bounded({
      method: req.method,
      ...byReference(req),
      headers: { get: (key) => req.get(key) ?? null },
      raw: req,
    });
    if ((body === null || typeof body === 'string') && init.status >= 400) {
      return sendLibraryRefusal(req, res, {
        status: init.status,
        body,
        ...(init.headers ? { headers: init.headers as Record<string, string> } : {}),
        message: PROTOCOL_REFUSALS[init.status] ?? init.statusText ?? 'The request was refused.',
      });
    }
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
    const held = holdSseStream(deps.streams, req, res.locals.principal, auth.session.cookieName, end);
    if (typeof held === 'string') {
      void body.return();
      const { limits } = deps.streams;
      if (held === 'replica') {
        return sendGraphqlError(
          req,
          res,
          `This replica holds as many streams as it may (${limits.maxPerReplica}); retry shortly.`,
          'SERVICE_UNAVAILABLE',
          RETRY_LATER,
        );
      }
      return sendGraphqlError(
        req,
        res,
        `At most ${limits.maxPerUser} streams (WebSocket subscriptions and SSE streams) per user, and ` +
          `${limits.sseAnonymousMaxPerIp} anonymous SSE streams per client address.`,
        'TOO_MANY_SUBSCRIPTIONS',
      );
    }
    const release = held;
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
