import {
  createSourceEventStream,
  getOperationAST,
  subscribe as graphqlSubscribe,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLError,
} from 'graphql';
import type { Logger } from 'pino';
import { createContext, type Context } from '../../context.js';
import type { OrderEvent } from '../../domain/model.js';
import type { Principal } from '../../domain/policy.js';
import type { Services } from '../../domain/services.js';
import type { OrderFeed } from '../../domain/subscriptions.js';
import { countedOpen, type Metrics } from '../observability/index.js';
import { OPERATION_SPAN, type OperationParams, type Pipeline } from '../pipeline/index.js';
import { tracing, type Parent, type Span } from '../../tracing.js';
import { boundedStream, SUBSCRIBER_BUFFER } from './boundedStream.js';
import { tailOf, TOO_SLOW, type Member, type SharedExecution, type Ticket } from './sharedExecution.js';

const EVENT_ID = /^\d{1,19}$/;
/** Event ids are PostgreSQL bigints; anything past the largest one is as malformed as letters. */
export const isEventId = (value: string) => EVENT_ID.test(value) && BigInt(value) <= 2n ** 63n - 1n;

/** Why a resume point is refused: it is not an id this API sent. */
export const BAD_EVENT_ID =
  'must be the id of an event this stream sent (a decimal integer up to 9223372036854775807).';

/** Why a subscriber is cut off: too slow (more than SUBSCRIBER_BUFFER events waiting), or its credential expired. */
export type StreamEnd = 'overflow' | 'expired';

/** What a transport (WebSocket, SSE) tells the subscribe path about one subscriber. */
export interface Subscriber {
  readonly principal: Principal;
  readonly requestId: string;
  /** The subscriber's logger, or how to make it on first use. */
  readonly log: Logger | (() => Logger);
  /** The client's address, whose rate budget the operation spends. */
  readonly ip: string | undefined;
  /** Ends the subscriber's connection or stream, saying why. */
  end(why: StreamEnd, message: string): void;
  /**
   * Resume after this event id (SSE Last-Event-ID, graphql-ws `extensions.lastEventId`): missed events first, then
   * live ones.
   */
  readonly after?: string;
  /**
   * The trace its operations continue, for a transport whose operations are not HTTP requests (WebSocket: the
   * `connection_init` payload's `traceparent`, else the upgrade's). SSE operations run inside their request's span.
   */
  readonly parent?: Parent;
}

export type Prepared = { ok: true; args: ExecutionArgs } | { ok: false; errors: GraphQLError[] };

/**
 * The one subscribe path, which the WebSocket server and the SSE router both call: the subscriber's context, the
 * pipeline's checks and cost, the ticket to a shared execution, and the join. The domain gives the feed (which
 * events this caller may see, for this filter: its visibility); this module decides how they reach the subscriber —
 * a bounded buffer of its own, or a shared execution that writes to it — and cuts it off when it falls behind or its
 * credential expires.
 */
export function createSubscribePath(deps: {
  services: Services;
  pipeline: Pipeline;
  sharedExecution: SharedExecution;
  metrics: Metrics;
}) {
  const { services, pipeline, sharedExecution, metrics } = deps;
  /** Operations admitted to shared execution, by their context: the ticket and how to write to the subscriber. */
  const sharing = new WeakMap<Context, { ticket: Ticket; member: Member }>();
  /** Contexts whose subscription joined a shared execution: their own event stream never yields. */
  const joined = new WeakSet<Context>();
  /** With tracing on: each prepared subscription's operation span, until its subscribe has run. */
  const operations = new WeakMap<Context, Span>();

  /** The feed's events for one subscriber: joined to its shared execution, or through a bounded buffer of its own. */
  function events(context: Context, subscriber: Subscriber, feed: OrderFeed): AsyncIterableIterator<OrderEvent> {
    let expiry: NodeJS.Timeout | undefined;
    let unlisten = () => {};
    const stream = boundedStream<OrderEvent>(
      SUBSCRIBER_BUFFER,
      () => {
        sharedExecution.countTooSlow();
        subscriber.end('overflow', TOO_SLOW);
      },
      () => {
        unlisten();
        clearTimeout(expiry);
      },
    );
    const shared = sharing.get(context);
    let leave: (() => void) | undefined;
    if (shared) {
      sharing.delete(context);
      joined.add(context);
      leave = sharedExecution.join(shared.ticket, feed, shared.member, context);
    }
    // Listening starts before any replay is read, so no event can fall between the two. A shared subscriber's own
    // stream stays empty: its results are written by the shared execution until it leaves.
    unlisten = leave ?? feed.listen((event) => stream.push(event));
    const { principal } = subscriber;
    const expiresAt = principal.kind === 'user' ? principal.expiresAt : undefined;
    if (expiresAt) {
      expiry = setTimeout(
        () => {
          stream.close();
          subscriber.end('expired', 'The access token has expired.');
        },
        // setTimeout fires at once for delays past 2^31-1 ms; no token lives that long anyway.
        Math.min(Math.max(0, expiresAt - Date.now()), 2 ** 31 - 1),
      );
      expiry.unref();
    }
    const delivered = subscriber.after === undefined ? stream.iterator : feed.resume(subscriber.after, stream.iterator);
    // Counted once it listens (or has joined): tests wait on this count to know a subscription is live.
    return countedOpen(delivered, metrics);
  }

  /** A subscriber's context: the caller, whose budget it spends, and where its subscription's events go. */
  function contextFor(subscriber: Subscriber): Context {
    const context: Context = createContext(services, subscriber.principal, subscriber.requestId, subscriber.log, {
      events: (feed) => events(context, subscriber, feed),
    });
    return pipeline.identify(context, subscriber.ip);
  }

  /** The pipeline's checks and cost, then the ticket to a shared execution when the subscriber can have one. */
  async function prepareIn(
    context: Context,
    params: OperationParams,
    subscriber: Subscriber,
    opts: { method?: string; member?: (context: Context) => Member },
  ): Promise<Prepared> {
    const prepared = await pipeline.prepare(params, context, opts);
    if (!prepared.ok || !opts.member || subscriber.after !== undefined) return prepared;
    const ticket = sharedExecution.admit(prepared.args);
    if (!ticket) return prepared;
    sharing.set(context, { ticket, member: opts.member(context) });
    return { ok: true, args: ticket.args };
  }

  async function subscribeIn(args: ExecutionArgs) {
    const context = args.contextValue as Context;
    if (!sharing.has(context)) return graphqlSubscribe(args);
    const source = (await createSourceEventStream(args)) as AsyncIterableIterator<ExecutionResult> | ExecutionResult;
    if (!(Symbol.asyncIterator in source) || joined.has(context)) return source;
    // A stream that did not join (no field of this schema does that today): run it the ordinary way.
    await source.return?.();
    return graphqlSubscribe(args);
  }

  return {
    contextFor,

    /**
     * Everything before execution: the pipeline's checks and cost admission, then, for a subscription that can
     * share its execution and whose transport can write shared results to it (`member`), its ticket. A resumed
     * stream replays its own backlog first, so only a live one can share.
     */
    async prepare(
      params: OperationParams,
      subscriber: Subscriber,
      opts: { method?: string; member?: (context: Context) => Member } = {},
    ): Promise<Prepared> {
      const context = contextFor(subscriber);
      if (!tracing.enabled) return prepareIn(context, params, subscriber, opts);
      // The operation's span: the pipeline's parse, validate and admission under it, then the subscribe (below).
      const span = tracing.start(OPERATION_SPAN, {
        kind: subscriber.parent ? 'server' : 'internal',
        ...(subscriber.parent ? { parent: subscriber.parent } : {}),
      });
      const prepared = await tracing.with(span, () => prepareIn(context, params, subscriber, opts));
      if (!prepared.ok) {
        tracing.fail(span, String(prepared.errors[0]?.extensions.code ?? 'BAD_REQUEST'));
        span?.end();
      } else if (span) {
        if (getOperationAST(prepared.args.document, prepared.args.operationName)?.operation === 'subscription')
          operations.set(context, span);
        // Queries and mutations over WebSocket are executed by graphql-ws itself, outside this path.
        else span.end();
      }
      return prepared;
    },

    /**
     * graphql-js's `subscribe`, except for a subscription that joined a shared execution: its event stream is
     * returned as it is, without the mapping to results graphql-js wraps around it (closures, a generator and
     * promises per subscriber), since it never yields — the shared execution writes its results. The resolver and
     * every check in it run the same way either way. With tracing on, it runs in the operation's span, which then
     * ends: the events it delivers later are traces of their own (sharedExecution.ts).
     */
    async subscribe(args: ExecutionArgs) {
      const span = operations.get(args.contextValue as Context);
      if (!span) return subscribeIn(args);
      operations.delete(args.contextValue as Context);
      try {
        return await tracing.with(span, () => subscribeIn(args));
      } finally {
        span.end();
      }
    },

    /**
     * The end of each shared result a subscriber receives after the group's head: the cost its own operation was
     * admitted at, then the closing braces.
     */
    tailOf: (context: Context) => tailOf(pipeline.costOf(context)),

    /** Errors that end an operation before it runs (a graphql-ws `error` message). */
    formatErrors: (errors: readonly GraphQLError[]) => pipeline.formatErrors(errors),

    /** A result as a subscriber served on its own receives it: masked, counted, with its cost. */
    formatOwn(result: ExecutionResult, context: Context, logUnexpected: (error: unknown) => void) {
      if (context.eventId) sharedExecution.countOwn();
      return pipeline.formatResult(result, context, logUnexpected);
    },
  };
}

export type SubscribePath = ReturnType<typeof createSubscribePath>;
