import { DomainError, invalidInput, type InvalidField } from './errors.js';
import { ORDER_STATUSES, type OrderLineInput, type OrderStatus, type PricedLine } from './model.js';

const NEXT: Readonly<Record<OrderStatus, readonly OrderStatus[]>> = {
  pending: ['paid', 'cancelled'],
  paid: ['shipped', 'cancelled'],
  shipped: ['delivered'],
  delivered: [],
  cancelled: [],
};

export const ORDER_LIMITS = {
  minQty: 1,
  maxQty: 999,
  minLines: 1,
  maxLines: 100,
  maxTotalCents: 2_147_483_647,
} as const;

export function isOrderStatus(value: string): value is OrderStatus {
  return (ORDER_STATUSES as readonly string[]).includes(value);
}

export function assertTransition(from: OrderStatus, to: string): asserts to is OrderStatus {
  if (!isOrderStatus(to)) {
    throw invalidInput([{ pointer: '/status', reason: `must be one of ${ORDER_STATUSES.join(', ')}` }]);
  }
  if (!NEXT[from].includes(to)) {
    throw new DomainError(
      'INVALID_TRANSITION',
      `An order that is ${from} cannot become ${to}` +
        (NEXT[from].length ? `; it can become ${NEXT[from].join(' or ')}.` : '; it is final.'),
    );
  }
}

/** Checks order lines against the limits and the catalogue; returns priced lines and the total. */
export function priceLines(
  lines: readonly OrderLineInput[],
  priceOf: ReadonlyMap<string, number>,
  pointerBase = '/items',
): { lines: PricedLine[]; totalCents: number } {
  const invalid: InvalidField[] = [];
  if (lines.length < ORDER_LIMITS.minLines || lines.length > ORDER_LIMITS.maxLines) {
    invalid.push({
      pointer: pointerBase,
      reason: `must hold ${ORDER_LIMITS.minLines} to ${ORDER_LIMITS.maxLines} lines`,
    });
  }
  const priced = lines.slice(0, ORDER_LIMITS.maxLines).map((line, i) => {
    const price = priceOf.get(line.sku);
    if (price === undefined) invalid.push({ pointer: `${pointerBase}/${i}/sku`, reason: `unknown SKU "${line.sku}"` });
    if (!Number.isInteger(line.qty) || line.qty < ORDER_LIMITS.minQty || line.qty > ORDER_LIMITS.maxQty) {
      invalid.push({
        pointer: `${pointerBase}/${i}/qty`,
        reason: `must be an integer from ${ORDER_LIMITS.minQty} to ${ORDER_LIMITS.maxQty}`,
      });
    }
    return { sku: line.sku, qty: line.qty, unitPriceCents: price ?? 0 };
  });
  const totalCents = priced.reduce((sum, l) => sum + l.qty * l.unitPriceCents, 0);
  if (invalid.length === 0 && totalCents > ORDER_LIMITS.maxTotalCents) {
    invalid.push({ pointer: pointerBase, reason: 'the order total exceeds the largest amount an order may hold' });
  }
  if (invalid.length) {
    throw invalidInput(invalid);
  }
  return { lines: priced, totalCents };
}
