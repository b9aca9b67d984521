/**
 * Conditional requests (RFC 9110 §13). Entity tags are compared strongly for If-Match and
 * weakly for If-None-Match, as §8.8.3.2 prescribes.
 */

type EtagList = '*' | string[];

/** Parses `*` or a comma-separated list of entity tags; returns null for a malformed header. */
export function parseEtagList(header: string): EtagList | null {
  const value = header.trim();
  if (value === '*') return '*';
  const tags = value.match(/(?:W\/)?"[^"]*"/g);
  if (!tags) return null;
  const rest = value.replace(/(?:W\/)?"[^"]*"/g, '').replace(/[\s,]/g, '');
  return rest === '' ? tags : null;
}

const opaque = (tag: string) => tag.replace(/^W\//, '');

/** If-Match: true when the current representation matches (a weak tag never matches). */
export function ifMatchSatisfied(list: EtagList, current: string): boolean {
  return list === '*' || list.some((tag) => !tag.startsWith('W/') && tag === current);
}

/** If-None-Match: true when a listed tag matches the current one, so a GET answers 304. */
export function ifNoneMatchMatches(list: EtagList, current: string): boolean {
  return list === '*' || list.some((tag) => opaque(tag) === opaque(current));
}
