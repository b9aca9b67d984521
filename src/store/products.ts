import type { Product } from '../domain/model.js';
import type { Queryable } from './db.js';
import { toProduct } from './rows.js';

export async function allProducts(db: Queryable): Promise<Product[]> {
  return (await db.query('select sku, name, price_cents from products order by sku')).map(toProduct);
}
