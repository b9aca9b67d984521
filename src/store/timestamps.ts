/** The OID of `timestamptz`, the type of every timestamp column. */
export const TIMESTAMPTZ = 1184;

/**
 * The form nearly every stored timestamp has (at least milliseconds): its first 23 characters are the answer's, so it
 * is cut, not matched into parts: a list carries two per row, so the match is paid hundreds of times a request
 * (measured in bench/README.md).
 */
const UTC_MILLIS = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3,6}\+00$/;
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
  if (UTC_MILLIS.test(text)) return `${text.slice(0, 10)}T${text.slice(11, 23)}Z`;
  const m = UTC_TEXT.exec(text);
  if (m) return `${m[1]}T${m[2]}.${((m[3] ?? '') + '000').slice(0, 3)}Z`;
  const date = new Date(text.replace(/^(\d{4,}-\d\d-\d\d) /, '$1T').replace(/([+-]\d\d)$/, '$1:00'));
  return Number.isNaN(date.getTime()) ? text : date.toISOString();
}
