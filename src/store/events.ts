import { z } from 'zod';
import { EVENT_KINDS, type EventKind, type Order, type OrderEvent } from '../domain/model.js';
import { tracing, TRACEPARENT } from '../tracing.js';
import type { Queryable } from './db.js';
import { StoredOrder } from './rows.js';

/** The domain's event as the outbox stores it. */
export type StoredEvent = OrderEvent;

export const EVENT_RETENTION_HOURS = 24;

const EventRow = z.object({
  id: z.string(),
  kind: z.enum(EVENT_KINDS),
  payload: z.unknown(),
  created_at: z.coerce.date(),
  trace_parent: z.string().nullable(),
  trace_state: z.string().nullable(),
});

/** The writer's trace context as the event carries it; a malformed one is dropped, never the event. */
const TraceContext = z
  .object({ traceparent: z.string().regex(TRACEPARENT), tracestate: z.string().max(512).optional() })
  .optional()
  .catch(undefined);

/** Selected wherever events are read, so that both paths between replicas (Redis, the poll) carry the trace. */
const EVENT_COLUMNS = 'id::text as id, kind, payload, created_at, trace_parent, trace_state';

function toEvent(row: unknown): StoredEvent {
  const r = EventRow.parse(row);
  const payload = typeof r.payload === 'string' ? (JSON.parse(r.payload) as unknown) : r.payload;
  const trace = r.trace_parent
    ? TraceContext.parse({ traceparent: r.trace_parent, ...(r.trace_state ? { tracestate: r.trace_state } : {}) })
    : undefined;
  return { id: r.id, kind: r.kind, order: StoredOrder.parse(payload), at: r.created_at, ...(trace ? { trace } : {}) };
}

const WireEvent = z.object({
  id: z.string().regex(/^\d+$/),
  kind: z.enum(EVENT_KINDS),
  order: StoredOrder,
  at: z.coerce.date(),
  trace: TraceContext,
});

/** An event as it crosses between replicas (JSON over Redis), validated on arrival. */
export function eventFromJson(text: string): StoredEvent {
  const { trace, ...event } = WireEvent.parse(JSON.parse(text));
  return trace ? { ...event, trace } : event;
}

/**
 * Appends an event inside the caller's transaction. The transaction-level lock makes writers of
 * events take ids one at a time and keep their place until they commit.
 */
export async function appendEvent(tx: Queryable, kind: EventKind, order: Order): Promise<StoredEvent> {
  await tx.query('select pg_advisory_xact_lock(7251004)');
  // The writing request's trace context (none with tracing off), for the links of the event's deliveries.
  const trace = tracing.carrier();
  const [row] = await tx.query(
    `insert into order_events (kind, order_id, customer_id, payload, trace_parent, trace_state)
     values ($1, $2, $3, $4::jsonb, $5, $6)
     returning ${EVENT_COLUMNS}`,
    [kind, order.id, order.customerId, JSON.stringify(order), trace?.traceparent ?? null, trace?.tracestate ?? null],
  );
  return toEvent(row);
}

/**
 * Events after `afterId`, oldest first, within the retention window. Ordered by the bigint column:
 * a bare `order by id` would pick the text alias, and "100" sorts before "86".
 */
export async function eventsAfter(db: Queryable, afterId: string, limit: number): Promise<StoredEvent[]> {
  const rows = await db.query(
    `select ${EVENT_COLUMNS} from order_events
     where order_events.id > $1::bigint and created_at > now() - make_interval(hours => $3)
     order by order_events.id limit $2`,
    [afterId, limit, EVENT_RETENTION_HOURS],
  );
  return rows.map(toEvent);
}

/**
 * Events after `afterId`, oldest first, however old: what webhooks have yet to turn into messages. A row that does
 * not parse is passed over (and named in `skipped`), so that it cannot hold up every later event; `lastId` is the
 * last id read either way.
 */
export async function allEventsAfter(
  db: Queryable,
  afterId: string,
  limit: number,
): Promise<{ events: StoredEvent[]; lastId: string | null; skipped: string[] }> {
  const rows = await db.query<{ id: string }>(
    `select ${EVENT_COLUMNS} from order_events where order_events.id > $1::bigint order by order_events.id limit $2`,
    [afterId, limit],
  );
  const events: StoredEvent[] = [];
  const skipped: string[] = [];
  for (const row of rows) {
    try {
      events.push(toEvent(row));
    } catch {
      skipped.push(String(row.id));
    }
  }
  return { events, lastId: rows.length ? String(rows.at(-1)!.id) : null, skipped };
}

/** The newest event id, or '0' when there is none. */
export async function latestEventId(db: Queryable): Promise<string> {
  const [row] = await db.query<{ id: string | null }>('select max(id)::text as id from order_events');
  return row?.id ?? '0';
}

/** Past the retention window, except events webhooks have not yet turned into messages (their replicas were down). */
export async function deleteOldEvents(db: Queryable): Promise<void> {
  await db.query(
    `delete from order_events where created_at < now() - make_interval(hours => $1)
       and id <= (select last_event_id from webhook_outbox_cursor where id = 1)`,
    [EVENT_RETENTION_HOURS],
  );
}
