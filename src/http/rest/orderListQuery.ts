import { DomainError, type InvalidField } from '../../domain/errors.js';
import type { ConnectionArgs, OrderConnectionPage } from '../../domain/orderListing.js';
import { decodeOrderCursor } from '../../domain/cursors.js';
import { PAGE } from '../../domain/orderService.js';

/**
 * GET /v1/orders's query parameters, the same filters and sorts as GraphQL's `orders` under REST's names, read into the
 * domain's connection arguments. Anything else, a repeat, or a malformed value is refused, naming the parameter with a
 * JSON pointer into the query (`/created[gte]`).
 */
export const LIST_PARAMETERS = [
  'limit',
  'cursor',
  'status',
  'created[gte]',
  'created[lt]',
  'customer_id',
  'sku',
  'order',
];

const SORTS = {
  created_at: { field: 'createdAt', direction: 'asc' },
  '-created_at': { field: 'createdAt', direction: 'desc' },
  updated_at: { field: 'updatedAt', direction: 'asc' },
  '-updated_at': { field: 'updatedAt', direction: 'desc' },
} as const;

/** Where the domain's pointers into GraphQL's arguments land among the query parameters. */
const PARAMETER_OF: Record<string, string> = {
  '/first': 'limit',
  '/last': 'limit',
  '/after': 'cursor',
  '/before': 'cursor',
  '/filter/status': 'status',
  '/filter/createdAt/gte': 'created[gte]',
  '/filter/createdAt/lt': 'created[lt]',
  '/filter/customerId': 'customer_id',
  '/filter/sku': 'sku',
};

export class ListQueryError extends Error {
  constructor(readonly invalid: readonly InvalidField[]) {
    super(invalid.map((i) => `${i.pointer.slice(1)} ${i.reason}`).join('; '));
  }
}

const refuse = (parameter: string, reason: string) => new ListQueryError([{ pointer: `/${parameter}`, reason }]);

/** The domain's BAD_USER_INPUT about a list request, as a refusal of the parameter it concerns. */
export function listQueryErrorOf(error: unknown): ListQueryError | null {
  if (!(error instanceof DomainError) || error.code !== 'BAD_USER_INPUT' || !error.details.invalid) return null;
  return new ListQueryError(
    error.details.invalid.map((i) => ({
      pointer: `/${PARAMETER_OF[i.pointer] ?? i.pointer.slice(1)}`,
      reason: i.reason,
    })),
  );
}

export function parseListQuery(query: Record<string, unknown>): ConnectionArgs {
  const values: Record<string, string> = {};
  for (const [name, value] of Object.entries(query)) {
    if (!LIST_PARAMETERS.includes(name)) {
      throw refuse(name, `is not a parameter of this list; it takes ${LIST_PARAMETERS.join(', ')}`);
    }
    if (typeof value !== 'string')
      throw refuse(name, 'must be given once (statuses: comma-separated, status=paid,shipped)');
    values[name] = value;
  }
  let limit: number | undefined;
  if (values.limit !== undefined) {
    // Plain decimal digits only: Number() would also take "0x10", "1e2" and " 5".
    limit = /^\d{1,20}$/.test(values.limit) ? Number(values.limit) : NaN;
    if (!(Number.isInteger(limit) && limit >= 1)) throw refuse('limit', `must be a whole number from 1 to ${PAGE.max}`);
    limit = Math.min(limit, PAGE.max);
  }
  let sort: ConnectionArgs['orderBy'] = null;
  if (values.order !== undefined) {
    // Own members only: `order=toString` must not find Object.prototype's.
    sort = Object.hasOwn(SORTS, values.order) ? SORTS[values.order as keyof typeof SORTS] : null;
    if (!sort) throw refuse('order', `must be one of ${Object.keys(SORTS).join(', ')}`);
  }
  const cursor = values.cursor === undefined ? null : decodeOrderCursor(values.cursor);
  if (values.cursor !== undefined && !cursor) throw refuse('cursor', 'is not a cursor this API issued');
  const backward = cursor?.backward ?? false;
  const size = limit ?? PAGE.default;
  const dateTime = (name: string) => {
    const value = values[name];
    if (value !== undefined && !/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d)$/i.test(value)) {
      throw refuse(name, 'must be an RFC 3339 date-time such as 2026-11-22T09:30:00Z');
    }
    return value ?? null;
  };
  return {
    ...(backward ? { last: size, before: values.cursor! } : { first: size, after: values.cursor ?? null }),
    orderBy: sort,
    filter: {
      status: values.status === undefined ? null : values.status.split(','),
      createdAt: { gte: dateTime('created[gte]'), lt: dateTime('created[lt]') },
      customerId: values.customer_id ?? null,
      sku: values.sku ?? null,
    },
  };
}

/** The Link header (RFC 8288) of a page: the same request, with the cursor of the next or previous page. */
export function pageLinks(path: string, query: Record<string, unknown>, page: OrderConnectionPage): string | null {
  const link = (cursor: string, rel: string) => {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) if (name !== 'cursor') params.set(name, String(value));
    params.set('cursor', cursor);
    return `<${path}?${params.toString()}>; rel="${rel}"`;
  };
  const links = [
    ...(page.pageInfo.hasNextPage && page.pageInfo.endCursor ? [link(page.pageInfo.endCursor, 'next')] : []),
    ...(page.pageInfo.hasPreviousPage && page.backwardCursor ? [link(page.backwardCursor, 'prev')] : []),
  ];
  return links.length ? links.join(', ') : null;
}
