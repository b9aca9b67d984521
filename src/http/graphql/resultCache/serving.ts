import type { NextFunction, Request, Response } from 'express';
import {
  getNamedType,
  TypeInfo,
  visit,
  visitWithTypeInfo,
  BREAK,
  type DocumentNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { LRUCache } from 'lru-cache';
import { Counter, Gauge } from 'prom-client';
import type { Context } from '../../context.js';
import type { OrderEvent } from '../../domain/model.js';
import { isStaff, type Principal } from '../../domain/policy.js';
import type { Metrics } from '../observability/metrics.js';
import { sha256 } from '../pipeline/persistedDocuments.js';
import { isRecord, namedHash, type Admission, type CostReport, type Pipeline } from '../pipeline/pipeline.js';
import { rateLimitHeaders } from '../middleware/rateBudget.js';

/** Types whose values change with order events: a response that selects one may hold an order. */
const ORDER_TYPES = new Set(['Order', 'OrderItem']);

/** Response headers that belong to one request, never to the stored response. */
const PER_REQUEST_HEADERS = new Set(['ratelimit', 'ratelimit-policy', 'x-request-id']);

export interface ResultCacheOptions {
  /** Bytes of stored responses (and their keys and documents), per replica. */
  readonly maxBytes: number;
  /** No entry lives longer than this, whatever the events say (the catalogue changes without one). */
  readonly ttlSeconds: number;
  /** A request whose key (variables, operation name, Accept, caller) is longer is executed and never stored. */
  readonly maxKeyBytes: number;
}

interface Entry {
  /** `data`, serialized once, as the miss sent it. */
  readonly data: string;
  /** Extensions other than `cost` (none today), serialized with the cost spliced in on every hit. */
  readonly extensions: Record<string, unknown> | undefined;
  readonly headers: readonly (readonly [string, string])[];
  /** Kept so that a hit is costed and charged exactly as a miss is. */
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
  readonly variables: Record<string, unknown> | undefined;
  /** Which order events flush it; null: none can change it (TTL only). */
  readonly partition: string | null;
  /** A PUBLIC response carries no rate-limit headers, as on a miss. */
  readonly public: boolean;
  readonly size: number;
}

/** What a request that may be stored carries from the lookup to the store: its key and the epoch it read at. */
interface Ticket {
  readonly key: string;
  readonly docHash: string;
  /** The document's hash and the operation name the request chose. */
  readonly operation: string;
  readonly epoch: number;
  readonly variables: Record<string, unknown> | undefined;
  /** Identical requests that arrive meanwhile wait for this one's result instead of executing too. */
  readonly flight: Flight;
}

/**
 * One execution of a key that others may wait for: settled with the stored entry; 'stale' when an order event made
 * its result unfit to store (waiters look again); or nothing when it was not storable at all (waiters execute).
 */
type Outcome = Entry | 'stale' | undefined;
interface Flight {
  readonly epoch: number;
  readonly done: Promise<Outcome>;
  settle(outcome: Outcome): void;
}

interface Pending {
  readonly ticket: Ticket;
  readonly headers: Map<string, string>;
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
  readonly partition: string | null;
  readonly public: boolean;
}

/**
 * What the lookup hands to Apollo's run of the same request, on the context itself: Apollo runs every operation with
 * a shallow copy of the context it is given, which keeps symbol-keyed properties but not the object's identity.
 */
const TICKET = Symbol('result cache ticket');
const ADMISSION = Symbol('result cache admission');
type Carried = { [TICKET]?: Ticket; [ADMISSION]?: Admission };

/**
 * The GraphQL result cache (RESULT_CACHE=on): pre-serialized responses to queries, in memory per replica, keyed by
 * document hash, operation name, variables, Accept and who is asking (anonymous, or the subject with all its roles
 * and scopes). Order events flush every entry that could hold the order (staff's and that customer's, plus any
 * entry whose owner is not known); a response computed from a read that began before a flush is not stored.
 */
export function createResultCache(deps: {
  schema: GraphQLSchema;
  pipeline: Pipeline;
  metrics: Metrics;
  options: ResultCacheOptions;
  /** The customer id a subject is known by in this process, without asking the database. */
  knownCustomerId: (subject: string) => string | undefined;
}) {
  const { schema, pipeline, metrics, options, knownCustomerId } = deps;
  const registry = metrics.registry;
  const hits = new Counter({
    name: 'result_cache_hits_total',
    help: 'GraphQL queries answered from the result cache.',
    registers: [registry],
  });
  const misses = new Counter({
    name: 'result_cache_misses_total',
    help: 'GraphQL queries looked up in the result cache and executed.',
    registers: [registry],
  });
  const flushes = new Counter({
    name: 'result_cache_flushes_total',
    help: 'Order events applied to the result cache (each flushes the entries that could hold the order).',
    registers: [registry],
  });
  const flushedEntries = new Counter({
    name: 'result_cache_flushed_entries_total',
    help: 'Result cache entries removed by order events.',
    registers: [registry],
  });
  const coalesced = new Counter({
    name: 'result_cache_coalesced_total',
    help: 'Hits that waited for an identical query already executing, instead of executing it again.',
    registers: [registry],
  });
  let waitingNow = 0;
  new Gauge({
    name: 'result_cache_waiting',
    help: 'Requests waiting now for an identical query that is executing.',
    registers: [registry],
    collect() {
      this.set(waitingNow);
    },
  });
  const staleStores = new Counter({
    name: 'result_cache_stale_stores_total',
    help: 'Results not stored because an order event arrived while they were computed.',
    registers: [registry],
  });

  // Entries by the partition order events flush: 'staff', 'c:<customer id>', or 'any' (flushed by every event).
  const byPartition = new Map<string, Set<string>>();
  const entries = new LRUCache<string, Entry>({
    maxSize: options.maxBytes,
    // One response may take at most an eighth of the cache, so a few large ones cannot empty it.
    maxEntrySize: Math.max(1, Math.floor(options.maxBytes / 8)),
    sizeCalculation: (entry) => entry.size,
    ttl: options.ttlSeconds * 1000,
    // Expired entries are found by a lookup or pushed out by size; no timers.
    ttlAutopurge: false,
    dispose: (entry, key) => {
      if (entry.partition === null) return;
      const keys = byPartition.get(entry.partition);
      keys?.delete(key);
      if (keys?.size === 0) byPartition.delete(entry.partition);
    },
  });
  new Gauge({
    name: 'result_cache_entries',
    help: 'Responses held in the result cache.',
    registers: [registry],
    collect() {
      this.set(entries.size);
    },
  });
  new Gauge({
    name: 'result_cache_bytes',
    help: 'Bytes the result cache counts against RESULT_CACHE_MAX_BYTES.',
    registers: [registry],
    collect() {
      this.set(entries.calculatedSize);
    },
  });

  const flights = new Map<string, Flight>();
  /**
   * Operations (document hash and operation name) seen to be mutations: their requests skip the cache entirely, so
   * identical mutations sent at once do not wait for one another. Bounded; one that falls out is learnt again.
   */
  const mutations = new Set<string>();
  function startFlight(key: string): Flight {
    let resolve!: (outcome: Outcome) => void;
    const done = new Promise<Outcome>((r) => (resolve = r));
    const flight: Flight = {
      epoch,
      done,
      settle(outcome) {
        if (flights.get(key) === flight) flights.delete(key);
        resolve(outcome);
      },
    };
    flights.set(key, flight);
    return flight;
  }

  /** Bumped by every order event: a result computed across a bump may predate the change, and is not stored. */
  let epoch = 0;
  /** Events this replica flushed for at commit; the bus then brings them again and they are skipped. */
  const flushedLocally = new Set<string>();

  const pending = new WeakMap<object, Pending>();
  const visibilities = new WeakMap<Principal, string>();
  const readsOrders = new WeakMap<DocumentNode, boolean>();

  /** Who is asking, as far as a response can tell: anonymous, or this subject with exactly these roles and scopes. */
  function visibilityOf(principal: Principal): string {
    let v = visibilities.get(principal);
    if (v === undefined) {
      v =
        principal.kind === 'anonymous'
          ? 'anonymous'
          : JSON.stringify([principal.subject, [...principal.roles].sort(), [...principal.scopes].sort()]);
      visibilities.set(principal, v);
    }
    return v;
  }

  function documentReadsOrders(document: DocumentNode): boolean {
    let reads = readsOrders.get(document);
    if (reads === undefined) {
      reads = false;
      const typeInfo = new TypeInfo(schema);
      visit(
        document,
        visitWithTypeInfo(typeInfo, {
          Field() {
            const type = typeInfo.getType();
            if (type && ORDER_TYPES.has(getNamedType(type).name)) {
              reads = true;
              return BREAK;
            }
            return undefined;
          },
        }),
      );
      readsOrders.set(document, reads);
    }
    return reads;
  }

  function partitionOf(document: DocumentNode, principal: Principal): string | null {
    if (!documentReadsOrders(document)) return null;
    if (principal.kind !== 'user') return 'any';
    if (isStaff(principal)) return 'staff';
    const customerId = knownCustomerId(principal.subject);
    return customerId ? `c:${customerId}` : 'any';
  }

  /**
   * The key of a request that may be answered from the cache, or nothing: only GET and POST requests in the shapes
   * Apollo accepts, whose document is named by its text or its hash, and whose key stays within the bound.
   */
  function describe(
    req: Request,
    principal: Principal,
  ): { key: string; docHash: string; operation: string; variables: Record<string, unknown> | undefined } | undefined {
    let params: Record<string, unknown>;
    let variables: unknown;
    if (req.method === 'GET') {
      // Apollo refuses a GET with another Content-Type; such a request is left to it.
      if (req.headers['content-type'] !== undefined) return undefined;
      params = req.query as Record<string, unknown>;
      if (params.variables !== undefined) {
        if (typeof params.variables !== 'string' || params.variables.length > options.maxKeyBytes) return undefined;
        try {
          variables = JSON.parse(params.variables);
        } catch {
          return undefined;
        }
      }
      if (params.extensions !== undefined) {
        if (typeof params.extensions !== 'string' || params.extensions.length > options.maxKeyBytes) return undefined;
        try {
          params = { ...params, extensions: JSON.parse(params.extensions) };
        } catch {
          return undefined;
        }
      }
    } else if (req.method === 'POST' && isRecord(req.body)) {
      params = req.body;
      variables = params.variables;
    } else return undefined;
    if (variables !== undefined && variables !== null && !isRecord(variables)) return undefined;
    if (params.extensions !== undefined && params.extensions !== null && !isRecord(params.extensions)) return undefined;
    const operationName = params.operationName ?? '';
    if (typeof operationName !== 'string') return undefined;
    let docHash: string | undefined;
    if (typeof params.query === 'string' && params.query !== '') {
      docHash = sha256(params.query);
    } else if (params.query === undefined || params.query === '') {
      docHash = namedHash(params);
    }
    if (docHash === undefined) return undefined;
    const vars = (variables ?? undefined) as Record<string, unknown> | undefined;
    const key = JSON.stringify([
      docHash,
      operationName,
      vars === undefined ? null : JSON.stringify(vars),
      req.headers.accept ?? null,
      visibilityOf(principal),
    ]);
    if (key.length > options.maxKeyBytes) return undefined;
    return { key, docHash, operation: `${docHash} ${operationName}`, variables: vars };
  }

  /** The stored response with this request's own cost and rate-limit headers (none on a PUBLIC one, as on a miss). */
  function sendHit(res: Response, entry: Entry, admission: Extract<Admission, { ok: true }>) {
    hits.inc();
    res.status(200);
    for (const [name, value] of entry.headers) res.setHeader(name, value);
    if (!entry.public) {
      for (const [name, value] of Object.entries(rateLimitHeaders(admission.charge)))
        res.setHeader(name.toLowerCase(), value);
    }
    res.send(bodyOf(entry.data, entry.extensions, admission.cost));
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
        const described = describe(req, ctx.principal);
        if (!described || mutations.has(described.operation)) return next();
        const serve = (entry: Entry) =>
          pipeline.admit(entry.document, entry.operation, entry.variables, ctx).then((admission) => {
            if (admission.ok) return sendHit(res, entry, admission);
            (ctx as Carried)[ADMISSION] = admission;
            next();
          });
        const execute = () => {
          const flight = startFlight(described.key);
          (ctx as Carried)[TICKET] = { ...described, epoch, flight };
          // Whatever becomes of the request (an error before Apollo's last hook, a closed connection), its waiters go on.
          res.once('close', () => flight.settle(undefined));
          next();
        };
        const lookup = (): void => {
          const entry = entries.get(described.key);
          if (entry) return void serve(entry).catch(next);
          // Only a flight that began after the last order event may answer: it read everything committed before it.
          const flight = flights.get(described.key);
          if (!flight || flight.epoch !== epoch) return execute();
          waitingNow++;
          flight.done
            .finally(() => waitingNow--)
            .then((outcome) => {
              // Not storable (an error, say): each waiter runs its own request, as without the cache.
              if (outcome === undefined) return execute();
              // An order event while waiting: the result may predate it, so look again (a newer flight, or execute).
              if (outcome === 'stale' || (outcome.partition !== null && epoch !== flight.epoch)) return lookup();
              coalesced.inc();
              return serve(outcome);
            })
            .catch(next);
        };
        lookup();
      };
    },

    /** The admission the lookup already made for this context, if any (taken once). */
    takeAdmission(ctx: Context): Admission | undefined {
      const admission = (ctx as Carried)[ADMISSION];
      delete (ctx as Carried)[ADMISSION];
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
      const ticket = (ctx as Carried)[TICKET];
      if (!ticket) return;
      const document = request.document;
      const operation = request.operation;
      if (operation?.operation !== 'query' || !document) {
        if (operation?.operation === 'mutation') {
          if (mutations.size >= 1000) mutations.delete(mutations.values().next().value!);
          mutations.add(ticket.operation);
        }
        return ticket.flight.settle(undefined);
      }
      misses.inc();
      const result = response.body.kind === 'single' ? response.body.singleResult : undefined;
      const storable =
        result &&
        !result.errors &&
        isRecord(result.data) &&
        (response.http.status ?? 200) === 200 &&
        request.queryHash === ticket.docHash;
      if (!storable) return ticket.flight.settle(undefined);
      const partition = partitionOf(document, ctx.principal);
      if (partition !== null && epoch !== ticket.epoch) {
        staleStores.inc();
        return ticket.flight.settle('stale');
      }
      pending.set(result!.data as object, {
        ticket,
        headers: response.http.headers,
        document,
        operation,
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
      if (marked.partition === null || epoch === ticket.epoch) {
        const headers = [...marked.headers].filter(([name]) => !PER_REQUEST_HEADERS.has(name));
        const size =
          2 * (data.length + ticket.key.length) +
          (extensions ? 2 * JSON.stringify(extensions).length : 0) +
          (marked.document.loc?.source.body.length ?? 0) +
          headers.reduce((n, [k, v]) => n + 2 * (k.length + v.length), 0) +
          512;
        const entry: Entry = {
          data,
          extensions,
          headers,
          document: marked.document,
          operation: marked.operation,
          variables: ticket.variables,
          partition: marked.partition,
          public: marked.public,
          size,
        };
        entries.set(ticket.key, entry);
        const stored = entries.has(ticket.key);
        if (marked.partition !== null && stored) {
          let keys = byPartition.get(marked.partition);
          if (!keys) byPartition.set(marked.partition, (keys = new Set()));
          keys.add(ticket.key);
        }
        ticket.flight.settle(stored ? entry : undefined);
      } else {
        staleStores.inc();
        ticket.flight.settle('stale');
      }
      return bodyOf(data, extensions, cost as CostReport | undefined);
    },

    /**
     * An order changed: every entry that could hold it goes (staff's, its customer's, and those whose owner is not
     * known), and results being computed now are not stored. `local` marks the flush at commit on the replica that
     * made the change; the bus then brings the same event, which needs no second flush.
     */
    onEvent(event: OrderEvent, local = false) {
      if (local) {
        if (flushedLocally.size >= 1000) flushedLocally.delete(flushedLocally.values().next().value!);
        flushedLocally.add(event.id);
      } else if (flushedLocally.delete(event.id)) return;
      epoch++;
      flushes.inc();
      for (const partition of ['staff', 'any', `c:${event.order.customerId}`]) {
        const keys = byPartition.get(partition);
        if (!keys) continue;
        for (const key of [...keys]) {
          if (entries.delete(key)) flushedEntries.inc();
        }
        byPartition.delete(partition);
      }
    },

    /** Entries and bytes held now (tests). */
    get size() {
      return { entries: entries.size, bytes: entries.calculatedSize };
    },
  };
}

export type ResultCache = ReturnType<typeof createResultCache>;

/** `{"data":…,"extensions":{…,"cost":…}}`, exactly as JSON.stringify writes Apollo's result. */
function bodyOf(data: string, extensions: Record<string, unknown> | undefined, cost: CostReport | undefined): string {
  const all = cost ? { ...extensions, cost } : extensions;
  return all ? `{"data":${data},"extensions":${JSON.stringify(all)}}` : `{"data":${data}}`;
}
