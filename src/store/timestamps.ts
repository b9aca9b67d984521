/** The OID of `timestamptz`, the type of every timestamp column. */
export const TIMESTAMPTZ = 1184;

/** PostgreSQL's text output of a timestamptz in UTC (DateStyle ISO): `2026-11-22 09:30:00.123456+00`. */
const UTC_TEXT = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00$/;

/**
 * A timestamptz as the API writes it, RFC 3339 in UTC with milliseconds (what `Date.toISOString()` gives), made from
 * PostgreSQL's text by moving characters: nothing computes with timestamps on the way from the row to the response,
 * so no Date is made for them. Milliseconds are truncated, as the drivers' Date parsing truncated them. Any other
 * form (another session time zone, a year past 9999 or BC, ±infinity) goes through Date; text Date cannot read is
 * kept as it is.
 */
export function isoTimestamp(text: string): string {
  const fast = utcText(text);
  if (fast !== null) return fast;
  const m = UTC_TEXT.exec(text);
  if (m) return `${m[1]}T${m[2]}.${((m[3] ?? '') + '000').slice(0, 3)}Z`;
  const date = new Date(text.replace(/^(\d{4,}-\d\d-\d\d) /, '$1T').replace(/([+-]\d\d)$/, '$1:00'));
  return Number.isNaN(date.getTime()) ? text : date.toISOString();
}

const isDigit = (c: number) => c >= 48 && c <= 57;
/** Whether `text` has digits at `positions`. */
const digitsAt = (text: string, positions: readonly number[]) => positions.every((i) => isDigit(text.charCodeAt(i)));
/** Where PostgreSQL's `YYYY-MM-DD HH:MM:SS` and the API's `YYYY-MM-DDTHH:MM:SS` have digits. */
const DATE_TIME_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];

/**
 * UTC_TEXT's conversion by character codes, for the form every timestamp column has in a UTC session (two in every
 * order row, so this runs hundreds of times per list): the regex cost more than the rest of the row's conversion.
 * Null for anything else, which UTC_TEXT then reads.
 */
function utcText(text: string): string | null {
  const n = text.length;
  // `…:SS+00` (n = 22) or `…:SS.f+00` to `…:SS.ffffff+00` (n = 24 to 29).
  if (n !== 22 && (n < 24 || n > 29)) return null;
  if (text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 32) return null;
  if (text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) return null;
  if (text.charCodeAt(n - 3) !== 43 || text.charCodeAt(n - 2) !== 48 || text.charCodeAt(n - 1) !== 48) return null;
  if (!digitsAt(text, DATE_TIME_DIGITS)) return null;
  if (n === 22) return `${text.slice(0, 10)}T${text.slice(11, 19)}.000Z`;
  if (text.charCodeAt(19) !== 46) return null;
  for (let i = 20; i < n - 3; i++) if (!isDigit(text.charCodeAt(i))) return null;
  const fraction = n >= 26 ? text.slice(20, 23) : (text.slice(20, n - 3) + '00').slice(0, 3);
  return `${text.slice(0, 10)}T${text.slice(11, 19)}.${fraction}Z`;
}

/** Whether `text` is a timestamp as the API writes it: `YYYY-MM-DDTHH:MM:SS.mmmZ` (what isoTimestamp gives). */
export function isApiTimestamp(text: string): boolean {
  return (
    text.length === 24 &&
    text.charCodeAt(4) === 45 &&
    text.charCodeAt(7) === 45 &&
    text.charCodeAt(10) === 84 &&
    text.charCodeAt(13) === 58 &&
    text.charCodeAt(16) === 58 &&
    text.charCodeAt(19) === 46 &&
    text.charCodeAt(23) === 90 &&
    digitsAt(text, DATE_TIME_DIGITS) &&
    isDigit(text.charCodeAt(20)) &&
    isDigit(text.charCodeAt(21)) &&
    isDigit(text.charCodeAt(22))
  );
}
