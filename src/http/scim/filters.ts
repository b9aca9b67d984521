import { parse, type Filter } from 'scim2-parse-filter';
import type { DirectoryQuery } from '../../domain/directory.js';
import { ScimError } from '../problems/index.js';
import { shown } from './attributes.js';

/** Longest filter read; directories send one or two comparisons. */
export const MAX_FILTER_LENGTH = 1000;
/** Most comparisons in one filter, and deepest nesting of groups. */
const MAX_COMPARISONS = 32;
const MAX_DEPTH = 8;

type FieldKind = 'text' | 'boolean' | 'timestamp';

/** What a filter may compare for one resource type: attribute path (lower case) → field and its kind. */
export type Filterable<F extends string> = Readonly<Record<string, { field: F; kind: FieldKind }>>;

const STRING_OPS = new Set(['eq', 'ne', 'co', 'sw', 'ew', 'gt', 'ge', 'lt', 'le', 'pr']);
const BOOLEAN_OPS = new Set(['eq', 'ne', 'pr']);
const TIMESTAMP_OPS = new Set(['eq', 'ne', 'gt', 'ge', 'lt', 'le', 'pr']);
const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$/i;

const invalid = (message: string) => new ScimError('invalidFilter', message);

/**
 * Text a filter parser is handed: bounded, and free of control characters. A SCIM filter never needs one (a string
 * value escapes them), and scim2-parse-filter's tokenizer backtracks exponentially on raw line breaks inside an
 * unterminated string, so they are refused before it sees them.
 */
export function checkFilterText(
  text: string,
  what = 'filter',
  failure: 'invalidFilter' | 'invalidPath' = 'invalidFilter',
): void {
  if (text.length > MAX_FILTER_LENGTH) {
    throw new ScimError(failure, `The ${what} is longer than ${MAX_FILTER_LENGTH} characters.`);
  }
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  if (/[\u0000-\u001f\u007f]/.test(text)) throw new ScimError(failure, `The ${what} contains a control character.`);
}

/**
 * The bounds every filter is held to, a list's `filter` and a PATCH path's value filter alike: at most
 * MAX_COMPARISONS comparisons, nested at most MAX_DEPTH deep. Returns how many comparisons it has.
 */
export function checkFilterShape(
  ast: Filter,
  what = 'filter',
  failure: 'invalidFilter' | 'invalidPath' = 'invalidFilter',
): number {
  let comparisons = 0;
  const walk = (node: Filter, depth: number): void => {
    if (depth > MAX_DEPTH) throw new ScimError(failure, `The ${what} nests deeper than ${MAX_DEPTH} levels.`);
    switch (node.op) {
      case 'and':
      case 'or':
        return node.filters.forEach((f) => walk(f, depth + 1));
      case 'not':
        return walk(node.filter, depth + 1);
      case '[]':
        return walk(node.valFilter, depth + 1);
    }
    if (++comparisons > MAX_COMPARISONS) {
      throw new ScimError(failure, `The ${what} has more than ${MAX_COMPARISONS} comparisons.`);
    }
  };
  walk(ast, 0);
  return comparisons;
}

/** Parses a filter with scim2-parse-filter, after `checkFilterText`; any failure is invalidFilter. */
export function parseFilterText(text: string, what = 'filter'): Filter {
  checkFilterText(text, what);
  try {
    return parse(text);
  } catch (error) {
    throw invalid(
      `The ${what} is not valid SCIM filter syntax (RFC 7644 §3.4.2.2): ${String((error as Error).message).slice(0, 120)}`,
    );
  }
}

/**
 * A list request's `filter` (RFC 7644 §3.4.2.2) as the domain's query over one resource's fields: parsed by
 * scim2-parse-filter, then every attribute looked up (in any case, with or without its schema URN) and every value
 * checked against its type. What cannot be answered is invalidFilter, never a guess.
 */
export function filterQuery<F extends string>(
  text: string,
  filterable: Filterable<F>,
  schema: string,
): DirectoryQuery<F> {
  const ast = parseFilterText(text);
  let comparisons = 0;
  const prefix = `${schema.toLowerCase()}:`;

  const convert = (node: Filter, depth: number): DirectoryQuery<F> => {
    if (depth > MAX_DEPTH) throw invalid(`The filter nests deeper than ${MAX_DEPTH} levels.`);
    switch (node.op) {
      case 'and':
      case 'or':
        return { op: node.op, of: node.filters.map((f) => convert(f, depth + 1)) };
      case 'not':
        return { op: 'not', of: convert(node.filter, depth + 1) };
      case '[]':
        throw invalid(`Value filters such as ${shown(`${node.attrPath}[…]`)} are supported in PATCH paths only.`);
    }
    if (++comparisons > MAX_COMPARISONS) throw invalid(`The filter has more than ${MAX_COMPARISONS} comparisons.`);
    let path = node.attrPath.toLowerCase();
    if (path.startsWith(prefix)) path = path.slice(prefix.length);
    const target = filterable[path];
    if (!target) throw invalid(`Cannot filter by ${shown(node.attrPath)}.`);
    const ops = target.kind === 'boolean' ? BOOLEAN_OPS : target.kind === 'timestamp' ? TIMESTAMP_OPS : STRING_OPS;
    if (!ops.has(node.op)) throw invalid(`${shown(node.attrPath)} cannot be compared with ${node.op}.`);
    if (node.op === 'pr') return { op: 'pr', field: target.field };
    return { op: node.op, field: target.field, value: comparable(target.kind, node.compValue, node.attrPath) };
  };
  return convert(ast, 0);
}

function comparable(kind: FieldKind, value: unknown, attribute: string): string | boolean {
  if (kind === 'boolean') {
    if (typeof value === 'boolean') return value;
    // Entra's string booleans, as in bodies.
    if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
    throw invalid(`${shown(attribute)} is compared with true or false.`);
  }
  if (typeof value !== 'string') throw invalid(`${shown(attribute)} is compared with a string.`);
  if (value.includes('\u0000')) throw invalid(`${shown(attribute)} is compared with a string that holds a NUL.`);
  if (kind === 'timestamp') return utcTimestamp(value, attribute);
  return value;
}

/**
 * An RFC 3339 date-time as the same instant in UTC, its fraction kept: a date that does not exist (February 30th,
 * hour 24) is refused rather than rolled over as Date.parse does, and so is an instant outside the years 1 to 9999,
 * which PostgreSQL cannot compare. Any offset is accepted, since it is converted here.
 */
function utcTimestamp(value: string, attribute: string): string {
  const wrong = () => invalid(`${shown(attribute)} is compared with an RFC 3339 date-time (a date that exists).`);
  const m = RFC3339.exec(value);
  if (!m) throw wrong();
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, ...number[]];
  const fraction = m[7] ?? '';
  const zone = m[8]!.toUpperCase();
  const at = new Date(0);
  at.setUTCFullYear(year, month! - 1, day);
  at.setUTCHours(hour!, minute, second, 0);
  const exists =
    at.getUTCFullYear() === year &&
    at.getUTCMonth() === month! - 1 &&
    at.getUTCDate() === day &&
    at.getUTCHours() === hour &&
    at.getUTCMinutes() === minute &&
    at.getUTCSeconds() === second;
  const offset =
    zone === 'Z' ? 0 : (zone[0] === '-' ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4)));
  if (!exists || (zone !== 'Z' && (Number(zone.slice(1, 3)) > 23 || Number(zone.slice(4)) > 59))) throw wrong();
  const utc = new Date(at.getTime() - offset * 60_000);
  if (utc.getUTCFullYear() < 1 || utc.getUTCFullYear() > 9999) {
    throw invalid(`${shown(attribute)} is compared with a date-time outside the years 0001 to 9999.`);
  }
  return `${utc.toISOString().slice(0, 19)}${fraction}Z`;
}
