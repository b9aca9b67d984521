import type { CustomerService } from './customers.js';
import { decodeOrderCursor, encodeOrderCursor, fingerprintOf } from './cursors.js';
import { invalidInput } from './errors.js';
import { ID_PATTERN } from './ids.js';
import { ORDER_STATUSES, type Order, type OrderStatus } from './model.js';
import { DEFAULT_SORT, type OrderListFilter, type OrderSort, type PositionedOrder } from './orderScan.js';
import type { OrderRepository } from './ports.js';
import { isStaff, requireScope, SCOPES, type Principal } from './policy.js';

/** A connection page: neither `first` nor `last` means the default; more than the maximum is refused, as GitHub does. */
export const CONNECTION_PAGE = { default: 20, max: 100 } as const;
/** `totalCount` counts this far and no further, so that it costs the same however many orders match. */
export const TOTAL_COUNT_BOUND = 10_000;

/** A filter as a client sent it, checked here. Timestamps may come as text or, from GraphQL's scalar, as a Date. */
export interface OrderFilterInput {
  readonly status?: readonly string[] | null;
  readonly createdAt?: { readonly gte?: string | Date | null; readonly lt?: string | Date | null } | null;
  readonly customerId?: string | null;
  readonly sku?: string | null;
}

export interface ConnectionArgs {
  readonly first?: number | null;
  readonly after?: string | null;
  readonly last?: number | null;
  readonly before?: string | null;
  readonly filter?: OrderFilterInput | null;
  readonly orderBy?: OrderSort | null;
}

export interface OrderEdgeModel {
  readonly cursor: string;
  readonly node: Order;
}

/** One page of a connection, as both transports answer it. */
export interface OrderConnectionPage {
  readonly edges: readonly OrderEdgeModel[];
  readonly orders: readonly Order[];
  readonly pageInfo: {
    readonly hasNextPage: boolean;
    readonly hasPreviousPage: boolean;
    readonly startCursor: string | null;
    readonly endCursor: string | null;
  };
  /** REST's `prev` link: the first order's position, to page backwards from. */
  readonly backwardCursor: string | null;
  /** Matching orders, up to TOTAL_COUNT_BOUND; one statement, run only when asked. */
  totalCount(): Promise<number>;
}

const emptyPage = (): OrderConnectionPage => ({
  edges: [],
  orders: [],
  pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null },
  backwardCursor: null,
  totalCount: async () => 0,
});

/**
 * A page whose cursors are made only when asked for: a page read through `nodes` needs none. Classes, so that a page
 * is made as a plain object is (an object literal with getters is built property by property at run time); what the
 * getters read is private, so that the page serializes as the plain one did.
 */
class PageInfo {
  readonly #start: PositionedOrder | undefined;
  readonly #end: PositionedOrder | undefined;
  readonly #fingerprint: string;
  constructor(
    readonly hasNextPage: boolean,
    readonly hasPreviousPage: boolean,
    edges: readonly PositionedOrder[],
    fingerprint: string,
  ) {
    this.#start = edges[0];
    this.#end = edges.at(-1);
    this.#fingerprint = fingerprint;
  }
  get startCursor(): string | null {
    return this.#start ? encodeOrderCursor(this.#start.position, this.#fingerprint) : null;
  }
  get endCursor(): string | null {
    return this.#end ? encodeOrderCursor(this.#end.position, this.#fingerprint) : null;
  }
}

class Page implements OrderConnectionPage {
  readonly orders: readonly Order[];
  readonly pageInfo: PageInfo;
  readonly #edges: readonly PositionedOrder[];
  readonly #fingerprint: string;
  readonly #count: () => Promise<number>;
  constructor(
    edges: readonly PositionedOrder[],
    fingerprint: string,
    flags: { readonly hasNextPage: boolean; readonly hasPreviousPage: boolean },
    count: () => Promise<number>,
  ) {
    this.orders = edges.map((e) => e.order);
    this.pageInfo = new PageInfo(flags.hasNextPage, flags.hasPreviousPage, edges, fingerprint);
    this.#edges = edges;
    this.#fingerprint = fingerprint;
    this.#count = count;
  }
  get edges(): OrderEdgeModel[] {
    return this.#edges.map((e) => ({ cursor: encodeOrderCursor(e.position, this.#fingerprint), node: e.order }));
  }
  get backwardCursor(): string | null {
    const start = this.#edges[0];
    return start ? encodeOrderCursor(start.position, this.#fingerprint, true) : null;
  }
  totalCount(): Promise<number> {
    return this.#count();
  }
}

function pageSize(value: number | null | undefined, name: 'first' | 'last'): number | undefined {
  if (value === null || value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 0) {
    throw invalidInput([{ pointer: `/${name}`, reason: 'must be a whole number from 0 to 100' }]);
  }
  if (value > CONNECTION_PAGE.max) {
    throw invalidInput([
      {
        pointer: `/${name}`,
        reason: `at most ${CONNECTION_PAGE.max} orders a page; ask for ${CONNECTION_PAGE.max} and continue from the page's cursor`,
      },
    ]);
  }
  return value;
}

function instant(value: string | Date | null | undefined, pointer: string): string | undefined {
  if (value === null || value === undefined) return undefined;
  const date = value instanceof Date ? value : /^\d{4}-\d\d-\d\dT/.test(value) ? new Date(value) : null;
  const year = date?.getUTCFullYear() ?? NaN;
  if (!date || Number.isNaN(date.getTime()) || year < 1970 || year > 9999) {
    throw invalidInput([
      { pointer, reason: 'must be an RFC 3339 date-time from 1970 to 9999, such as 2026-11-22T09:30:00Z' },
    ]);
  }
  return date.toISOString();
}

/** Checks a client's filter; the result is what the list's cursors are fingerprinted with. */
export function checkFilter(input: OrderFilterInput | null | undefined): OrderListFilter {
  if (!input) return {};
  const filter: { -readonly [K in keyof OrderListFilter]: OrderListFilter[K] } = {};
  if (input.status !== null && input.status !== undefined) {
    const statuses = [...new Set(input.status)].sort();
    const unknown = statuses.find((s) => !(ORDER_STATUSES as readonly string[]).includes(s));
    if (!statuses.length || unknown !== undefined) {
      throw invalidInput([
        { pointer: '/filter/status', reason: `must name one or more of ${ORDER_STATUSES.join(', ')}` },
      ]);
    }
    filter.statuses = statuses as OrderStatus[];
  }
  const gte = instant(input.createdAt?.gte, '/filter/createdAt/gte');
  const lt = instant(input.createdAt?.lt, '/filter/createdAt/lt');
  if (gte !== undefined) filter.createdGte = gte;
  if (lt !== undefined) filter.createdLt = lt;
  if (input.customerId !== null && input.customerId !== undefined) {
    if (!ID_PATTERN.test(input.customerId) || !input.customerId.startsWith('cus_')) {
      throw invalidInput([{ pointer: '/filter/customerId', reason: 'must be a customer id such as cus_01jd…' }]);
    }
    filter.customerId = input.customerId;
  }
  if (input.sku !== null && input.sku !== undefined) {
    if (input.sku.length < 1 || input.sku.length > 64) {
      throw invalidInput([{ pointer: '/filter/sku', reason: 'must be a SKU of 1 to 64 characters' }]);
    }
    filter.sku = input.sku;
  }
  return filter;
}

/** The fingerprint of the unfiltered list in the default order: that of REST cursors from before filters. */
const DEFAULT_LIST = fingerprintOf([{}, DEFAULT_SORT.field, DEFAULT_SORT.direction]);

const reversed = (sort: OrderSort): OrderSort => ({ ...sort, direction: sort.direction === 'asc' ? 'desc' : 'asc' });

/** Cursor-paged order lists (Relay Cursor Connections, and REST's Link pages): who sees what is decided here. */
export function createOrderListing(deps: { orders: OrderRepository; customers: CustomerService }) {
  const { orders, customers } = deps;

  function position(cursor: string | null | undefined, name: 'after' | 'before', fingerprint: string) {
    if (cursor === null || cursor === undefined) return undefined;
    const decoded = decodeOrderCursor(cursor);
    if (!decoded) throw invalidInput([{ pointer: `/${name}`, reason: 'is not a cursor this API issued' }]);
    if ((decoded.fingerprint ?? DEFAULT_LIST) !== fingerprint) {
      throw invalidInput([
        {
          pointer: `/${name}`,
          reason:
            'was issued for another filter or sort; send the filter and sort it came with, or start without a cursor',
        },
      ]);
    }
    return decoded.position;
  }

  /**
   * One page. `scope` narrows to one customer (Customer.ordersConnection). A customer sees their own orders only:
   * a filter (or scope) naming anyone else finds nothing, as if they had no orders.
   */
  async function connection(
    principal: Principal,
    args: ConnectionArgs,
    scope: { readonly customerId?: string } = {},
  ): Promise<OrderConnectionPage> {
    const user = requireScope(principal, SCOPES.read);
    const first = pageSize(args.first, 'first');
    const last = pageSize(args.last, 'last');
    if (first !== undefined && last !== undefined) {
      throw invalidInput([
        { pointer: '/last', reason: 'give first (to page forwards) or last (to page backwards), not both' },
      ]);
    }
    const sort = args.orderBy ?? DEFAULT_SORT;
    const filter = checkFilter(args.filter);
    const fingerprint = fingerprintOf([filter, sort.field, sort.direction]);
    const after = position(args.after, 'after', fingerprint);
    const before = position(args.before, 'before', fingerprint);

    const wanted = [filter.customerId, scope.customerId].filter((id) => id !== undefined);
    const own = isStaff(user) ? undefined : await customers.idFor(user);
    const customerId = own ?? wanted[0];
    if (wanted.some((id) => id !== customerId)) return emptyPage();
    const scanned: OrderListFilter = { ...filter, ...(customerId !== undefined ? { customerId } : {}) };

    const backward = last !== undefined;
    const size = last ?? first ?? CONNECTION_PAGE.default;
    let edges: readonly PositionedOrder[] = [];
    let more = false;
    let behind = false;
    if (size > 0) {
      const from = backward ? before : after;
      const until = backward ? after : before;
      const result = await orders.scan({
        filter: scanned,
        sort: backward ? reversed(sort) : sort,
        ...(from ? { after: from } : {}),
        ...(until ? { until } : {}),
        limit: size + 1,
        probe: from !== undefined,
      });
      more = result.rows.length > size;
      behind = result.behind;
      edges = more || backward ? result.rows.slice(0, size) : result.rows;
      if (backward) (edges as PositionedOrder[]).reverse();
    }
    return new Page(
      edges,
      fingerprint,
      { hasNextPage: backward ? behind : more, hasPreviousPage: backward ? more : behind },
      () => orders.count(scanned, TOTAL_COUNT_BOUND),
    );
  }

  return { connection };
}

export type OrderListing = ReturnType<typeof createOrderListing>;
