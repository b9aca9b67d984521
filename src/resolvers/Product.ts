import type { ProductResolvers } from '../generated/graphql.js';

/** The SKU is the catalogue's primary key: stable and unique, so it doubles as the id clients normalize by. */
export const Product: ProductResolvers = {
  id: (product) => product.sku,
};
