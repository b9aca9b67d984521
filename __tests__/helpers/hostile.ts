/** The hostile documents of issue #10, shared by the limits tests of each mode. */

/** The 143-byte query: within the depth limit, about 1.2 M orders. */
export const FAN_OUT =
  '{ recentOrders(first:100) { customer { orders(first:100) { customer { orders(first:100) { customer { orders(first:100) { id }}}}}}}}';

/** Each fragment spreads the next twice: a walk that does not cache fragments doubles per level. */
export function chainedFragments(levels = 30): string {
  const fragments = Array.from({ length: levels }, (_, i) =>
    i === levels - 1
      ? `fragment F${i} on Customer { id }`
      : `fragment F${i} on Customer { id orders(first: 1) { customer { ...F${i + 1} } } ...F${i + 1} }`,
  );
  return `{ recentOrders(first: 1) { customer { ...F0 } } } ${fragments.join(' ')}`;
}

export const aliases = (n: number, field: string) =>
  `{ ${Array.from({ length: n }, (_, i) => `a${i}: ${field}`).join(' ')} }`;

export const createOrders = (n: number) =>
  `mutation { ${Array.from({ length: n }, (_, i) => `m${i}: createOrder(input: { items: [{ sku: "KB-001", qty: 1 }] }) { id }`).join(' ')} }`;
