import type { DirectoryQuery, GroupField, UserField } from '../domain/directory.js';

/** How a field of a list filter reads in SQL: its expression, and whether it compares without regard to case. */
interface Column {
  readonly sql: string;
  readonly kind: 'text' | 'caseless' | 'boolean' | 'timestamp';
}

const USER_COLUMNS: Record<Exclude<UserField, 'email'>, Column> = {
  id: { sql: 'u.id', kind: 'text' },
  userName: { sql: 'u.user_name', kind: 'caseless' },
  externalId: { sql: 'u.external_id', kind: 'text' },
  displayName: { sql: 'u.display_name', kind: 'caseless' },
  active: { sql: 'u.active', kind: 'boolean' },
  created: { sql: 'u.created_at', kind: 'timestamp' },
  updated: { sql: 'u.updated_at', kind: 'timestamp' },
};

const GROUP_COLUMNS: Record<Exclude<GroupField, 'member'>, Column> = {
  id: { sql: 'g.id', kind: 'text' },
  displayName: { sql: 'g.display_name', kind: 'caseless' },
  externalId: { sql: 'g.external_id', kind: 'text' },
  created: { sql: 'g.created_at', kind: 'timestamp' },
  updated: { sql: 'g.updated_at', kind: 'timestamp' },
};

const COMPARE = { eq: '=', gt: '>', ge: '>=', lt: '<', le: '<=' } as const;

/** A `like` pattern that matches the value literally, with `%` where the operator wants anything. */
function likePattern(op: 'co' | 'sw' | 'ew', value: string): string {
  const literal = value.replace(/[\\%_]/g, (c) => `\\${c}`);
  return op === 'co' ? `%${literal}%` : op === 'sw' ? `${literal}%` : `%${literal}`;
}

type Leaf<F extends string> = Exclude<DirectoryQuery<F>, { op: 'and' | 'or' | 'not' }>;

/** One comparison on a column, its value added to `params`. */
function compare(column: Column, query: Leaf<string>, params: unknown[]): string {
  if (query.op === 'pr') {
    return column.kind === 'boolean' || column.kind === 'timestamp'
      ? `${column.sql} is not null`
      : `${column.sql} <> ''`;
  }
  const { op, value } = query;
  const place = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  if (column.kind === 'boolean') {
    if (typeof value !== 'boolean' || (op !== 'eq' && op !== 'ne')) throw new Error(`cannot ${op} a boolean`);
    return `${column.sql} ${op === 'eq' ? '=' : '<>'} ${place(value)}`;
  }
  if (typeof value !== 'string') throw new Error(`cannot compare text with ${typeof value}`);
  const caseless = column.kind === 'caseless';
  const left = caseless ? `lower(${column.sql})` : column.sql;
  const right = (v: string) => (caseless ? `lower(${place(v)})` : place(v));
  if (column.kind === 'timestamp') {
    if (op === 'co' || op === 'sw' || op === 'ew') throw new Error(`cannot ${op} a timestamp`);
    if (op === 'ne') return `${column.sql} <> ${place(value)}::timestamptz`;
    return `${column.sql} ${COMPARE[op]} ${place(value)}::timestamptz`;
  }
  switch (op) {
    case 'ne':
      return `${left} is distinct from ${right(value)}`;
    case 'co':
    case 'sw':
    case 'ew':
      return `${left} like ${right(likePattern(op, value))} escape '\\'`;
    default:
      return `${left} ${COMPARE[op]} ${right(value)}`;
  }
}

/** A filter over one resource's fields as a SQL condition, values in `params` (never in the text). */
function condition<F extends string>(
  query: DirectoryQuery<F>,
  params: unknown[],
  leaf: (query: Leaf<F>, params: unknown[]) => string,
): string {
  switch (query.op) {
    case 'and':
    case 'or':
      return `(${query.of.map((q) => condition(q, params, leaf)).join(` ${query.op} `)})`;
    case 'not':
      // A missing value makes a comparison unknown, and `not unknown` is still unknown: coalesce to false first.
      return `not coalesce(${condition(query.of, params, leaf)}, false)`;
    default:
      return leaf(query, params);
  }
}

export function userCondition(query: DirectoryQuery<UserField>, params: unknown[]): string {
  return condition(query, params, (leaf, p) => {
    if (leaf.field !== 'email') return compare(USER_COLUMNS[leaf.field], leaf, p);
    const value = compare({ sql: `e->>'value'`, kind: 'caseless' }, leaf, p);
    return `exists (select 1 from jsonb_array_elements(u.emails) e where ${value})`;
  });
}

export function groupCondition(query: DirectoryQuery<GroupField>, params: unknown[]): string {
  return condition(query, params, (leaf, p) => {
    if (leaf.field !== 'member') return compare(GROUP_COLUMNS[leaf.field], leaf, p);
    const value = compare({ sql: 'm.user_id', kind: 'text' }, leaf, p);
    return `exists (select 1 from directory_members m where m.group_id = g.id and ${value})`;
  });
}
