import express, { type Request, type Response } from 'express';
import { specifiedRules, validate, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { createHandler } from 'graphql-sse';
import type { Logger } from 'pino';
import type { TokenVerifier } from '../auth/bearer.js';
import { createContext, type Context } from '../context.js';
import type { Services } from '../domain/services.js';
import { authenticate, type AuthenticateOptions } from './authenticate.js';
import { graphqlClientErrors } from './clientErrors.js';
import { refuseCookieCsrf } from './cookieCsrf.js';
import { depthLimit, MAX_DEPTH } from './depthLimit.js';
import { formatResult } from './graphqlErrors.js';
import { graphqlAuthFailure, refuseForeignOrigins } from './graphqlEnvelope.js';

const EVENT_ID = /^\d{1,19}$/;
/** Event ids are PostgreSQL bigints; anything past the largest one is as malformed as letters. */
const isEventId = (value: string) => EVENT_ID.test(value) && BigInt(value) <= 2n ** 63n - 1n;

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
 * GraphQL over server-sent events (the graphql-sse protocol, both its distinct-connections and
 * single-connection modes) at /graphql/stream. Credentials: `Authorization: Bearer` or the
 * session cookie. In distinct-connections mode a `Last-Event-ID` header resumes a subscription:
 * the events missed since (kept 24 hours) come first, then live ones.
 */
export function createSseRouter(deps: {
  schema: GraphQLSchema;
  services: Services;
  verifier: TokenVerifier;
  logger: Logger;
  session: NonNullable<AuthenticateOptions['session']>;
  trustedOrigins: ReadonlySet<string>;
}) {
  const rules = [...specifiedRules, depthLimit(MAX_DEPTH)];
  /** How to cut off the stream a request holds, for a subscriber that is too slow or whose credential expired. */
  const enders = new WeakMap<Request, (reason: string) => void>();
  const open = new Set<(reason?: string) => void>();

  // graphql-sse wants a context indexable by any key; ours is a closed interface.
  type SseContext = Context & Record<PropertyKey, unknown>;
  const handler = createHandler<Request, undefined, SseContext>({
    schema: deps.schema,
    validate: (schema, document) => validate(schema, document, rules),
    context: (req) => {
      const raw = req.raw;
      const principal = raw.res!.locals.principal;
      const lastEventId = raw.get('last-event-id');
      return createContext(deps.services, principal, String(raw.id), raw.log, {
        onEnd: (_why, message) => enders.get(raw)?.(message),
        ...(principal.kind === 'user' && principal.expiresAt ? { expiresAt: principal.expiresAt } : {}),
        ...(lastEventId !== undefined && isEventId(lastEventId) ? { after: lastEventId } : {}),
      }) as SseContext;
    },
    onNext: (ctx, req, result) =>
      formatResult(result as ExecutionResult, ctx, (err) =>
        req.raw.log.error({ err }, 'unexpected GraphQL error'),
      ) as never,
  });

  const router = express.Router();
  router.use(refuseCookieCsrf(deps.session.cookieName));
  router.use(refuseForeignOrigins(deps.trustedOrigins));
  router.use(authenticate(deps.verifier, graphqlAuthFailure, { session: deps.session }));
  router.use(express.json({ limit: '64kb' }), graphqlClientErrors('64 kB'));
  router.all('/', async (req: Request, res: Response) => {
    const [body, init] = await handler({
      method: req.method,
      url: req.originalUrl,
      headers: { get: (key) => req.get(key) ?? null },
      body: req.body ?? null,
      raw: req,
      context: undefined,
    });
    res.writeHead(init.status, init.statusText, { ...init.headers, 'cache-control': 'no-store' });
    if (body === null || typeof body === 'string') {
      res.end(body ?? undefined);
      return;
    }
    let ended = false;
    const end = (reason?: string) => {
      if (ended) return;
      ended = true;
      open.delete(end);
      if (reason) res.write(`: closed: ${reason.replace(/\n/g, ' ')}\n\n`);
      void body.return();
      res.end();
    };
    enders.set(req, end);
    open.add(end);
    req.on('close', () => end());
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
