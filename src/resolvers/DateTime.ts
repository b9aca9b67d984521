import { GraphQLError, GraphQLScalarType, Kind } from 'graphql';

/** What `Date.toISOString()` writes for years 0–9999. */
const CANONICAL = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

function parse(value: unknown): Date {
  const date = typeof value === 'string' && /^\d{4}-\d\d-\d\dT/.test(value) ? new Date(value) : null;
  if (!date || Number.isNaN(date.getTime())) {
    throw new GraphQLError('DateTime must be an RFC 3339 date-time string such as 2026-11-22T09:30:00Z.');
  }
  return date;
}

export const DateTime = new GraphQLScalarType({
  name: 'DateTime',
  specifiedByURL: 'https://www.rfc-editor.org/rfc/rfc3339',
  serialize(value) {
    if (value instanceof Date) return value.toISOString();
    // Timestamps from the database arrive as text already in this form (src/store/timestamps.ts): passed through.
    if (typeof value === 'string' && CANONICAL.test(value)) return value;
    return parse(value).toISOString();
  },
  parseValue: parse,
  parseLiteral(ast) {
    if (ast.kind !== Kind.STRING) throw new GraphQLError('DateTime must be given as a string.');
    return parse(ast.value);
  },
});
