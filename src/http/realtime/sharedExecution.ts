import {
  execute,
  getOperationAST,
  GraphQLError,
  print,
  TypeInfo,
  visit,
  visitWithTypeInfo,
  BREAK,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FormattedExecutionResult,
} from 'graphql';
import type { Logger } from 'pino';
import { copyContext, type Context } from '../../context.js';
import { tracing } from '../../tracing.js';
import type { OrderEvent } from '../../domain/model.js';
import type { OrderFeed } from '../../domain/subscriptions.js';
import type { Metrics } from '../observability/index.js';
import type { CostReport, Pipeline } from '../pipeline/index.js';
import { SUBSCRIBER_BUFFER } from './boundedStream.js';

/** Bytes a subscriber's socket may hold in this process, not yet taken by the network, before it is cut off. */
export const SUBSCRIBER_BUFFER_BYTES = 1024 * 1024;
export const TOO_SLOW = `More than ${SUBSCRIBER_BUFFER} events or 1 MiB were waiting: the subscriber is too slow.`;

/** Writes between two turns of the event loop, over all fan-outs of the process together. */
const SLICE = 200;

/**
 * Fields whose answer depends on who asks beyond the audience: `Customer.orders` is read with the subscriber's
 * own credential (its scopes, its customer). A document that selects one is executed per subscriber.
 */
const PER_VIEWER_FIELDS = new Set(['Customer.orders']);

interface Corkable {
  cork(): void;
  uncork(): void;
}

/** One subscriber of a shared execution, as its transport writes to it. */
export interface Member {
  /**
   * Writes one result. `head` is the serialized result without its two closing braces (it ends inside
   * `extensions`), the same for every member of a group; the transport adds its envelope around it.
   */
  write(head: Head, eventId: string): void;
  /** Whether more than SUBSCRIBER_BUFFER results or SUBSCRIBER_BUFFER_BYTES wait in this process. */
  backedUp(): boolean;
  /** Ends the subscriber (WebSocket close 1008, the SSE stream ends). */
  cutOff(reason: string): void;
}

/** One event's serialized result, shared by a group: as text, and as the UTF-8 bytes sockets are sent. */
export interface Head {
  readonly text: string;
  readonly bytes: Buffer;
}

/** A subscriber's admission to shared execution: the document every member of its group runs. */
export interface Ticket {
  readonly key: string;
  /** The document, printed. */
  readonly text: string;
  readonly args: ExecutionArgs;
}

interface Group {
  readonly key: string;
  /** The operation's name, for its delivery spans. */
  readonly operationName: string | undefined;
  readonly text: string;
  readonly args: ExecutionArgs;
  readonly context: Context;
  readonly members: Set<Member>;
  unlisten: () => void;
  queue: Promise<void>;
}

/**
 * The end of a result's `extensions` a member adds after the shared head: the cost its own subscribe was
 * admitted at (every GraphQL answer carries it), then the closing braces.
 */
export function tailOf(cost: CostReport | undefined): string {
  return cost ? `,"cost":${JSON.stringify(cost)}}}` : '}}';
}

/** The serialized result up to the inside of `extensions`, which always holds the event id. */
function headOf(result: FormattedExecutionResult, eventId: string): string {
  const { extensions, ...rest } = result;
  const body = JSON.stringify(rest);
  const ext = JSON.stringify({ ...extensions, eventId });
  return `${body === '{}' ? '{' : `${body.slice(0, -1)},`}"extensions":${ext.slice(0, -1)}`;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function selectsPerViewerField(args: ExecutionArgs): boolean {
  const typeInfo = new TypeInfo(args.schema);
  let found = false;
  visit(
    args.document,
    visitWithTypeInfo(typeInfo, {
      Field() {
        const parent = typeInfo.getParentType();
        const field = typeInfo.getFieldDef();
        if (parent && field && PER_VIEWER_FIELDS.has(`${parent.name}.${field.name}`)) {
          found = true;
          return BREAK;
        }
        return undefined;
      },
    }),
  );
  return found;
}

/**
 * Shared execution of subscriptions: subscribers with the same document, variables and feed (audience and
 * filter) form a group; each event is executed once per group, through the pipeline's formatting and masking,
 * serialized once, and the same string is written to every member with only its envelope around it. A fan-out
 * gives the event loop back every SLICE writes, and a member whose socket holds too much is cut off.
 */
export function createSharedExecution(deps: { pipeline: Pipeline; metrics: Metrics; logger: Logger }) {
  const groups = new Map<string, Group>();
  /** Parsed documents by printed text, shared by the groups that run them. */
  const documents = new Map<string, { document: DocumentNode; groups: number }>();
  let writes = 0;
  /** Sockets written to in this slice, corked so that all they were given goes out in one system call. */
  const corked = new Set<Corkable>();

  const flush = () => {
    for (const socket of corked) socket.uncork();
    corked.clear();
  };

  async function run(group: Group, event: OrderEvent) {
    // A fresh context per event: the resolver gives it new loaders and the event id.
    const context: Context = copyContext(group.context);
    deps.metrics.subscriptionExecutions.inc({ sharing: 'shared' });
    let result: ExecutionResult;
    try {
      result = await execute({ ...group.args, contextValue: context, rootValue: event });
    } catch (error) {
      result = {
        errors: [new GraphQLError('Executing a subscription event failed.', { originalError: error as Error })],
      };
    }
    const formatted = deps.pipeline.formatResult(result, context, (err) =>
      deps.logger.error({ err, reqId: context.requestId }, 'unexpected GraphQL error'),
    );
    const text = headOf(formatted, event.id);
    const head: Head = { text, bytes: Buffer.from(text) };
    for (const member of [...group.members]) {
      if (!group.members.has(member)) continue;
      if (member.backedUp()) {
        group.members.delete(member);
        deps.metrics.slowSubscribers.inc();
        member.cutOff(TOO_SLOW);
      } else {
        member.write(head, event.id);
      }
      // Checked here rather than awaited on every write: an await per member costs a promise and a microtask.
      if (++writes >= SLICE) {
        writes = 0;
        flush();
        await nextTurn();
      }
    }
    flush();
  }

  /**
   * One event's delivery to a group, as a span of its own trace (a consumer's, by OpenTelemetry's messaging
   * conventions) linked to the trace of the request that wrote the event, on whichever replica that was: the
   * execution's SQL hangs under it.
   */
  function traced(group: Group, event: OrderEvent) {
    return tracing.inSpan(
      `deliver ${group.operationName ?? 'subscription'}`,
      {
        kind: 'consumer',
        root: true,
        ...(event.trace ? { links: [event.trace] } : {}),
        attributes: {
          'messaging.operation.type': 'process',
          'messaging.operation.name': 'deliver',
          'messaging.destination.name': 'order-events',
          'messaging.message.id': event.id,
          'graphql.operation.type': 'subscription',
          'graphql.operation.name': group.operationName,
          'orders.event.kind': event.kind,
          'orders.subscribers': group.members.size,
        },
      },
      () => run(group, event),
    );
  }

  return {
    /**
     * The ticket of a subscription that can share its execution, or undefined: only subscriptions, and only
     * documents that select no per-viewer field. Its document is the one already parsed for the same text.
     */
    admit(args: ExecutionArgs): Ticket | undefined {
      if (getOperationAST(args.document, args.operationName)?.operation !== 'subscription') return undefined;
      if (selectsPerViewerField(args)) return undefined;
      const text = print(args.document);
      const document = documents.get(text)?.document ?? args.document;
      // No variables and an empty object are the same request, whichever way a client library sends it.
      const variables = args.variableValues && Object.keys(args.variableValues).length ? args.variableValues : null;
      const key = JSON.stringify([text, args.operationName ?? null, variables]);
      return { key, text, args: { ...args, document } };
    },

    /** Adds a member to its group, starting the group if it is the first; returns how to leave. */
    join(ticket: Ticket, feed: OrderFeed, member: Member, context: Context): () => void {
      const key = `${feed.key}\n${ticket.key}`;
      let group = groups.get(key);
      if (!group) {
        const { text } = ticket;
        const doc = documents.get(text) ?? { document: ticket.args.document, groups: 0 };
        doc.groups += 1;
        documents.set(text, doc);
        // The first member's context without its stream: the group must not keep that subscriber's socket.
        const { stream: _stream, ...shared } = context;
        const created: Group = {
          key,
          operationName: getOperationAST(doc.document, ticket.args.operationName)?.name?.value,
          text,
          args: { ...ticket.args, document: doc.document, contextValue: undefined },
          context: shared,
          members: new Set(),
          unlisten: () => {},
          queue: Promise.resolve(),
        };
        created.unlisten = feed.listen((event) => {
          created.queue = created.queue
            .then(() => (tracing.enabled ? traced(created, event) : run(created, event)))
            .catch((err: unknown) => deps.logger.error({ err }, 'shared subscription fan-out failed'));
        });
        groups.set(key, created);
        group = created;
      }
      const joined = group;
      joined.members.add(member);
      // The group's own key, not this join's copy of it: a member holds nothing of its own but its envelope.
      return () => {
        joined.members.delete(member);
        if (joined.members.size || groups.get(joined.key) !== joined) return;
        joined.unlisten();
        groups.delete(joined.key);
        const doc = documents.get(joined.text);
        if (doc && --doc.groups <= 0) documents.delete(joined.text);
      };
    },

    /**
     * Holds a socket's writes until the end of the current slice of the fan-out: the results of several
     * subscriptions (or groups) on one connection then leave in one write.
     */
    cork(socket: Corkable) {
      if (corked.has(socket)) return;
      socket.cork();
      corked.add(socket);
    },

    /** Counts an event executed for one subscriber alone (the transports' own path). */
    countOwn: () => deps.metrics.subscriptionExecutions.inc({ sharing: 'own' }),

    /** Counts a subscriber served on its own that was cut off for falling behind. */
    countTooSlow: () => deps.metrics.slowSubscribers.inc(),

    /** Groups and members, for tests and metrics. */
    size: () => ({ groups: groups.size, members: [...groups.values()].reduce((n, g) => n + g.members.size, 0) }),
  };
}

export type SharedExecution = ReturnType<typeof createSharedExecution>;

/** Counts a socket's writes not yet handed to the network, for `Member.backedUp`. */
export function pendingWrites() {
  let pending = 0;
  const done = () => {
    pending -= 1;
  };
  return {
    /** Pass as the write's callback. */
    done,
    sent: () => {
      pending += 1;
    },
    tooMany: () => pending > SUBSCRIBER_BUFFER,
  };
}
