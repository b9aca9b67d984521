import type { Queryable } from '../store/db.js';
import { allProducts } from '../store/products.js';

export interface Product {
  readonly sku: string;
  readonly name: string;
  readonly priceCents: number;
}

interface Snapshot {
  readonly at: number;
  readonly products: readonly Product[];
  readonly bySku: ReadonlyMap<string, Product>;
  readonly prices: ReadonlyMap<string, number>;
}

const REFRESH_MS = 60_000;

/**
 * The catalogue is small, read on every order write and changed only by operators in the
 * database, so it is held in memory and re-read at most once a minute.
 */
export function createCatalogue(db: Queryable) {
  let cached: Snapshot | null = null;
  let loading: Promise<Snapshot> | null = null;

  async function load(): Promise<Snapshot> {
    if (cached && Date.now() - cached.at < REFRESH_MS) return cached;
    loading ??= allProducts(db)
      .then((products) => {
        cached = {
          at: Date.now(),
          products,
          bySku: new Map(products.map((p) => [p.sku, p])),
          prices: new Map(products.map((p) => [p.sku, p.priceCents])),
        };
        return cached;
      })
      .finally(() => (loading = null));
    return loading;
  }

  return {
    async list(): Promise<readonly Product[]> {
      return (await load()).products;
    },
    async bySku(sku: string): Promise<Product | null> {
      return (await load()).bySku.get(sku) ?? null;
    },
    async prices(): Promise<ReadonlyMap<string, number>> {
      return (await load()).prices;
    },
  };
}

export type Catalogue = ReturnType<typeof createCatalogue>;
