import { z } from 'zod';
import { EVENT_KINDS, type EventKind, type Order, type OrderEvent } from '../domain/model.js';
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
});

function toEvent(row: unknown): StoredEvent {
  const r = EventRow.parse(row);
  const payload = typeof r.payload === 'string' ? (JSON.parse(r.payload) as unknown) : r.payload;
  return { id: r.id, kind: r.kind, order: StoredOrder.parse(payload), at: r.created_at };
}

const WireEvent = z.object({
  id: z.string().regex(/^\d+$/),
  kind: z.enum(EVENT_KINDS),
  order: StoredOrder,
  at: z.coerce.date(),
});

/** An event as it crosses between replicas (JSON over Redis), validated on arrival. */
export function eventFromJson(text: string): StoredEvent {
  return WireEvent.parse(JSON.parse(text));
}

/**
 * Appends an event inside the caller's transaction. The transaction-level lock makes writers of
 * events take ids one at a time and keep their place until they commit.
 */
export async function appendEvent(tx: Queryable, kind: EventKind, order: Order): Promise<StoredEvent> {
  await tx.query('select pg_advisory_xact_lock(7251004)');
  const [row] = await tx.query(
    `insert into order_events (kind, order_id, customer_id, payload) values ($1, $2, $3, $4::jsonb)
     returning id::text as id, kind, payload, created_at`,
    [kind, order.id, order.customerId, JSON.stringify(order)],
  );
  return toEvent(row);
}

/**
 * Events after `afterId`, oldest first, within the retention window. Ordered by the bigint column:
 * a bare `order by id` would pick the text alias, and "100" sorts before "86".
 */
export async function eventsAfter(db: Queryable, afterId: string, limit: number): Promise<StoredEvent[]> {
  const rows = await db.query(
    `select id::text as id, kind, payload, created_at from order_events
     where order_events.id > $1::bigint and created_at > now() - make_interval(hours => $3)
     order by order_events.id limit $2`,
    [afterId, limit, EVENT_RETENTION_HOURS],
  );
  return rows.map(toEvent);
}

/** The newest event id, or '0' when there is none. */
export async function latestEventId(db: Queryable): Promise<string> {
  const [row] = await db.query<{ id: string | null }>('select max(id)::text as id from order_events');
  return row?.id ?? '0';
}

export async function deleteOldEvents(db: Queryable): Promise<void> {
  await db.query('delete from order_events where created_at < now() - make_interval(hours => $1)', [
    EVENT_RETENTION_HOURS,
  ]);
}
