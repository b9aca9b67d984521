import { createHash } from 'node:crypto';

/**
 * The one cursor format of the API, for REST and GraphQL alike: base64url of a JSON array whose first two members are
 * a row's position (its sort key and id). Cursors are opaque to clients; only what encodeCursor could have made is
 * accepted back, so a tampered cursor (a BC date, a NUL byte, any other id) is refused here rather than failing in
 * the database.
 */

/** Longer than any cursor this module makes. */
const MAX_CURSOR_LENGTH = 200;
/** Nothing this API stored predates the epoch; the bound keeps BC and far-future dates away from SQL. */
const EPOCH_YEAR = 1970;
/** A sort key as PostgreSQL writes a timestamptz in UTC: full precision, so a cursor never falls between rows. */
const STORED_KEY = /^(\d{4})-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?\+00$/;
/** The API's RFC 3339 form, which the cursors of webhook lists (and REST order cursors before connections) hold. */
const ISO_KEY = /^(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const ORDER_ID = /^ord_[0-9a-hjkmnp-tv-z]{26}$/;

/** A row's place in a sorted list: its sort key (a timestamp) and, to break ties, its id. */
export interface Position {
  readonly key: string;
  readonly id: string;
}

function decodeArray(cursor: string): unknown[] | null {
  if (cursor.length > MAX_CURSOR_LENGTH || !/^[\w-]+$/.test(cursor)) return null;
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    return Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

function validKey(key: unknown): key is string {
  if (typeof key !== 'string') return false;
  const iso = ISO_KEY.exec(key);
  if (iso) {
    const at = new Date(key);
    if (Number.isNaN(at.getTime()) || at.toISOString() !== key) return false;
  } else if (!STORED_KEY.test(key) || Number.isNaN(new Date(key.replace(' ', 'T').replace('+00', 'Z')).getTime())) {
    return false;
  }
  const year = Number(key.slice(0, 4));
  return year >= EPOCH_YEAR && year <= 9999;
}

/** The cursor of a position in a list sorted by creation time, newest first (webhook endpoints, deliveries). */
export function encodeCursor(item: { readonly createdAt: string; readonly id: string }): string {
  return Buffer.from(JSON.stringify([item.createdAt, item.id])).toString('base64url');
}

/** A position encodeCursor made, with an id of `idPattern`; null for anything else. */
export function decodePosition(cursor: string, idPattern: RegExp): Position | null {
  const value = decodeArray(cursor);
  if (!value || value.length !== 2) return null;
  const [key, id] = value;
  return validKey(key) && ISO_KEY.test(key) && typeof id === 'string' && idPattern.test(id) ? { key, id } : null;
}

/**
 * A cursor into an order list: the position, the fingerprint of the filter and sort it was issued for (so that it
 * is refused with another), and, for REST's `prev` links, that it pages backwards.
 */
export interface OrderCursor {
  readonly position: Position;
  /** Null for cursors REST issued before lists could be filtered: they belong to the default list. */
  readonly fingerprint: string | null;
  readonly backward: boolean;
}

export function encodeOrderCursor(position: Position, fingerprint: string, backward = false): string {
  const value = [position.key, position.id, fingerprint, ...(backward ? ['b'] : [])];
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

export function decodeOrderCursor(cursor: string): OrderCursor | null {
  const value = decodeArray(cursor);
  if (!value || value.length < 2 || value.length > 4) return null;
  const [key, id, fingerprint, direction] = value;
  if (!validKey(key) || typeof id !== 'string' || !ORDER_ID.test(id)) return null;
  if (value.length === 2)
    return ISO_KEY.test(key) ? { position: { key, id }, fingerprint: null, backward: false } : null;
  if (typeof fingerprint !== 'string' || !/^[\w-]{1,16}$/.test(fingerprint)) return null;
  if (value.length === 4 && direction !== 'b') return null;
  return { position: { key, id }, fingerprint, backward: value.length === 4 };
}

/** Digests already made, by their JSON: a page's filter and sort are mostly ones asked for before. */
const FINGERPRINTS = new Map<string, string>();
/** Filters are the clients' own, so the memo is bounded: past this many it starts again. */
const MAX_FINGERPRINTS = 1_000;

/** A short digest of what a list's order depends on: equal for equal filters and sorts, whichever transport asked. */
export function fingerprintOf(value: unknown): string {
  const json = JSON.stringify(value);
  let fingerprint = FINGERPRINTS.get(json);
  if (fingerprint === undefined) {
    fingerprint = createHash('sha256').update(json).digest('base64url').slice(0, 12);
    if (FINGERPRINTS.size >= MAX_FINGERPRINTS) FINGERPRINTS.clear();
    FINGERPRINTS.set(json, fingerprint);
  }
  return fingerprint;
}
