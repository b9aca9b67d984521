import type { Product } from '../domain/model.js';
import type { Queryable } from './db.js';
import { productRows } from './rows.js';

export async function allProducts(db: Queryable): Promise<Product[]> {
  return productRows.all(await db.queryResult('select sku, name, price_cents from products order by sku'));
}
