import type { Product } from './model.js';
import type { ProductRepository } from './ports.js';

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
export function createCatalogue(products: ProductRepository) {
  let cached: Snapshot | null = null;
  let loading: Promise<Snapshot> | null = null;

  async function load(): Promise<Snapshot> {
    if (cached && Date.now() - cached.at < REFRESH_MS) return cached;
    loading ??= products
      .all()
      .then((all) => {
        cached = {
          at: Date.now(),
          products: all,
          bySku: new Map(all.map((p) => [p.sku, p])),
          prices: new Map(all.map((p) => [p.sku, p.priceCents])),
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
