import type { NextFunction, Request, Response } from 'express';
import type { DocumentNode, OperationDefinitionNode } from 'graphql';
import type { Context } from '../../../context.js';
import { rateLimitHeaders } from '../../middleware/index.js';
import {
  isRecord,
  type Admission,
  type CostReport,
  type Pipeline,
  type PreparedDocument,
} from '../../pipeline/index.js';
import type { Flight, Flights } from './flight.js';
import type { Described, Keying } from './keying.js';
import type { ResultCacheCounters } from './metrics.js';
import { sizeOf, type Entry, type EntryStore } from './store.js';

/** Response headers that belong to one request, never to the stored response. */
const PER_REQUEST_HEADERS = new Set(['ratelimit', 'ratelimit-policy', 'x-request-id']);

/** What a request that may be stored carries from the lookup to the store: its key and the epoch it read at. */
export interface Ticket extends Described {
  readonly epoch: number;
  /** Identical requests that arrive meanwhile wait for this one's result instead of executing too. */
  readonly flight: Flight;
}

/** A result consider() marked to be stored when Apollo serializes it. */
interface Pending {
  readonly ticket: Ticket;
  readonly headers: Map<string, string>;
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
  readonly record: PreparedDocument | undefined;
  readonly partition: string | null;
  readonly public: boolean;
}

declare module '../../../context.js' {
  interface Context {
    /**
     * HTTP only: what the cache's lookup hands to Apollo's run of the same request. Apollo runs every operation with a
     * shallow copy of the context it is given, which keeps this object but not the context's identity.
     */
    resultCache?: {
      /** The request's key and epoch, when its result may be stored. */
      ticket?: Ticket;
      /** A refused charge the lookup already made, taken by the plugin instead of charging again. */
      admission?: Admission;
    };
  }
}

/** `{"data":…,"extensions":{…,"cost":…}}`, exactly as JSON.stringify writes Apollo's result. */
function bodyOf(data: string, extensions: Record<string, unknown> | undefined, cost: CostReport | undefined): string {
  const all = cost ? { ...extensions, cost } : extensions;
  return all ? `{"data":${data},"extensions":${JSON.stringify(all)}}` : `{"data":${data}}`;
}

/**
 * Serving from the cache: the middleware before Apollo (a hit, a wait on an identical execution, or an execution
 * with a ticket), and the hooks after it that store a ticket's result (consider, then stringify).
 */
export function createServing(deps: {
  pipeline: Pipeline;
  keying: Keying;
  flights: Flights;
  store: EntryStore;
  counters: ResultCacheCounters;
}) {
  const { pipeline, keying, flights, store, counters } = deps;
  const pending = new WeakMap<object, Pending>();

  /** The stored response with this request's own cost and rate-limit headers (none on a PUBLIC one, as on a miss). */
  function sendHit(res: Response, entry: Entry, admission: Extract<Admission, { ok: true }>) {
    counters.hits.inc();
    for (const [name, value] of entry.headers) res.setHeader(name, value);
    if (!entry.public) {
      for (const [name, value] of Object.entries(rateLimitHeaders(admission.charge)))
        res.setHeader(name.toLowerCase(), value);
    }
    // Written once, as apolloMount.ts writes a miss.
    const body = bodyOf(entry.data, entry.extensions, admission.cost);
    res.writeHead(200, { 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  return {
    /**
     * Before Apollo: answers a stored query (charging the budget as a miss would), or leaves a ticket on the
     * request's context so that its result may be stored. A refused charge is handed on to Apollo, which sends the
     * refusal from it without charging again.
     */
    middleware(context: (req: Request, res: Response) => Context) {
      return (req: Request, res: Response, next: NextFunction) => {
        const ctx = context(req, res);
        // Apollo's context function takes this one, so the ticket and any admission made here go with it.
        res.locals.graphqlContext = ctx;
        const described = keying.describe(req, res.locals.graphqlParams, ctx.principal, res.locals.graphqlHash);
        if (!described || flights.isMutation(described.operation)) return next();
        const serve = (entry: Entry) =>
          pipeline.admit(entry.document, entry.operation, entry.variables, ctx, entry.record).then((admission) => {
            if (admission.ok) return sendHit(res, entry, admission);
            ctx.resultCache = { ...ctx.resultCache, admission };
            next();
          });
        const execute = () => {
          const epoch = store.epoch();
          const flight = flights.start(described.key, epoch);
          ctx.resultCache = { ticket: { ...described, epoch, flight } };
          // Whatever becomes of the request (an error before Apollo's last hook, a closed connection), its waiters go on.
          res.once('close', () => flight.settle(undefined));
          next();
        };
        const lookup = (): void => {
          const entry = store.get(described.key);
          if (entry) return void serve(entry).catch(next);
          // Only a flight that began after the last order event may answer: it read everything committed before it.
          const flight = flights.current(described.key);
          if (!flight || flight.epoch !== store.epoch()) return execute();
          flights
            .wait(flight)
            .then((outcome) => {
              // Not storable (an error, say): each waiter runs its own request, as without the cache.
              if (outcome === undefined) return execute();
              // An order event while waiting: the result may predate it, so look again (a newer flight, or execute).
              if (outcome === 'stale' || (outcome.partition !== null && store.epoch() !== flight.epoch))
                return lookup();
              counters.coalesced.inc();
              return serve(outcome);
            })
            .catch(next);
        };
        lookup();
      };
    },

    /** The admission the lookup already made for this context, if any (taken once). */
    takeAdmission(ctx: Context): Admission | undefined {
      const carried = ctx.resultCache;
      const admission = carried?.admission;
      if (admission) carried!.admission = undefined;
      return admission;
    },

    /**
     * After execution (Apollo's willSendResponse, once `extensions.cost` is set): a query with a ticket counts as a
     * miss, and its result is marked to be stored when Apollo serializes it, if it is a plain 200 without errors
     * and no order event arrived since the lookup.
     */
    consider(
      ctx: Context,
      request: {
        queryHash?: string | undefined;
        document?: DocumentNode | undefined;
        operation?: OperationDefinitionNode | undefined;
        overallPublic: boolean;
      },
      response: {
        http: { status?: number | undefined; headers: Map<string, string> };
        body: { kind: string; singleResult?: { data?: unknown; errors?: unknown } };
      },
    ) {
      const ticket = ctx.resultCache?.ticket;
      if (!ticket) return;
      const document = request.document;
      const operation = request.operation;
      if (operation?.operation !== 'query' || !document) {
        if (operation?.operation === 'mutation') flights.rememberMutation(ticket.operation);
        return ticket.flight.settle(undefined);
      }
      counters.misses.inc();
      const result = response.body.kind === 'single' ? response.body.singleResult : undefined;
      const storable =
        result &&
        !result.errors &&
        isRecord(result.data) &&
        (response.http.status ?? 200) === 200 &&
        request.queryHash === ticket.docHash;
      if (!storable) return ticket.flight.settle(undefined);
      const partition = keying.partitionOf(document, ctx.principal);
      if (partition !== null && store.epoch() !== ticket.epoch) {
        counters.staleStores.inc();
        return ticket.flight.settle('stale');
      }
      pending.set(result!.data as object, {
        ticket,
        headers: response.http.headers,
        document,
        operation,
        record: ctx.prepared,
        partition,
        public: request.overallPublic,
      });
    },

    /**
     * Apollo's stringifyResult: the response as JSON.stringify would write it, and, for a result marked by
     * consider(), the same bytes stored without `extensions.cost`.
     */
    stringify(value: { errors?: unknown; data?: unknown; extensions?: Record<string, unknown> }): string {
      const marked = isRecord(value.data) ? pending.get(value.data) : undefined;
      if (!marked || value.errors !== undefined) return JSON.stringify(value);
      pending.delete(value.data as object);
      const data = JSON.stringify(value.data);
      const { cost, ...rest } = value.extensions ?? {};
      const extensions = Object.keys(rest).length ? rest : undefined;
      const { ticket } = marked;
      // An event may have arrived since consider(): the same guard, at the last moment.
      if (marked.partition === null || store.epoch() === ticket.epoch) {
        const headers = [...marked.headers].filter(([name]) => !PER_REQUEST_HEADERS.has(name));
        const entry: Entry = {
          data,
          extensions,
          headers,
          document: marked.document,
          operation: marked.operation,
          record: marked.record,
          variables: ticket.variables,
          partition: marked.partition,
          public: marked.public,
          size: sizeOf(ticket.key, data, extensions, marked.document, headers),
        };
        ticket.flight.settle(store.put(ticket.key, entry) ? entry : undefined);
      } else {
        counters.staleStores.inc();
        ticket.flight.settle('stale');
      }
      return bodyOf(data, extensions, cost as CostReport | undefined);
    },
  };
}
