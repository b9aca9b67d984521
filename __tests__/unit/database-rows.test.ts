import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import pg from 'pg';
import { customerBySubject, customersByIds } from '../../src/store/customers.js';
import type { Database, Queryable } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { openDatabase } from '../../src/store/open.js';
import { findOrder, itemsOfOrders, listOrders } from '../../src/store/orders.js';
import { allProducts } from '../../src/store/products.js';
import { customerRows, orderItemRows, orderRows, productRows, RowShapeError } from '../../src/store/rows.js';
import { isoTimestamp } from '../../src/store/timestamps.js';
import { testDatabase } from '../helpers/testRun.js';

/**
 * Rows are checked where they enter the program: once per result set, from its row description (column names and
 * type OIDs), with what the description cannot prove (an order's status, a timestamp's form) checked on each row, and
 * nullability left to the `not null` constraints checked here against the catalogue. A drifted schema fails loudly.
 * On the embedded database, and on PostgreSQL too (a schema of its own) when DATABASE_URL is set: the drivers
 * describe results each their own way.
 */
const ROWS = `
  insert into customers (id, subject, name, email) values ('cus_rows1', null, 'Row Customer', null);
  insert into orders (id, customer_id, status, total_cents, version, created_at, updated_at)
    values ('ord_rows1', 'cus_rows1', 'paid', 1250, 3, '2026-11-22 09:30:00.123456+00', '2026-11-22 09:31:00+00');
  insert into order_items (order_id, line_no, sku, qty, unit_price_cents) values ('ord_rows1', 1, 'KB-001', 2, 500);
`;
const ORDER = {
  id: 'ord_rows1',
  customerId: 'cus_rows1',
  status: 'paid',
  totalCents: 1250,
  version: 3,
  createdAt: '2026-11-22T09:30:00.123Z',
  updatedAt: '2026-11-22T09:31:00.000Z',
};

async function openPostgresSchema(url: string): Promise<{ db: Database; drop: () => Promise<void> }> {
  const schema = `test_${randomBytes(6).toString('hex')}`;
  const db = await openDatabase({ kind: 'postgres', url, schema });
  await migrate(db);
  await db.query(`insert into products (sku, name, price_cents) values ('KB-001', 'Mechanical keyboard', 8900)`);
  return {
    db,
    async drop() {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`drop schema if exists "${schema}" cascade`);
      await client.end();
    },
  };
}

const engines: [string, () => Promise<{ db: Database; drop: () => Promise<void> }>][] = [
  ['the embedded database', async () => ({ db: await testDatabase(), drop: async () => undefined })],
];
const url = process.env.DATABASE_URL;
if (url) engines.push(['PostgreSQL', () => openPostgresSchema(url)]);

const ROLLBACK = new Error('rolled back');

describe.each(engines)('database rows on %s', (_engine, open) => {
  let db: Database;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ db, drop } = await open());
    for (const sql of ROWS.trim().split(';\n')) await db.query(sql);
  });
  afterAll(async () => {
    await db.close();
    await drop();
  });

  // Each drift is read through a statement this file sends nowhere else: PostgreSQL refuses a named prepared
  // statement whose result type a change of schema altered ("cached plan must not change result type") before the
  // rows could be checked, which is loud too, but not what is shown here.

  /** Runs `fn` on a schema changed by `ddl`, in a transaction that is rolled back. */
  async function drifted(ddl: readonly string[], fn: (tx: Queryable) => Promise<void>): Promise<void> {
    await assert.rejects(
      db.transaction(async (tx) => {
        for (const sql of ddl) await tx.query(sql);
        await fn(tx);
        throw ROLLBACK;
      }),
      (error) => error === ROLLBACK,
    );
  }

  test('rows as the driver gives them read as the domain model', async () => {
    assert.deepEqual(await findOrder(db, 'ord_rows1'), ORDER);
    assert.equal(await findOrder(db, 'ord_none'), null);
    assert.deepEqual(await customersByIds(db, ['cus_rows1']), [
      { id: 'cus_rows1', subject: null, name: 'Row Customer', email: null },
    ]);
    assert.deepEqual(await itemsOfOrders(db, ['ord_rows1']), [
      { orderId: 'ord_rows1', lineNo: 1, sku: 'KB-001', qty: 2, unitPriceCents: 500 },
    ]);
    assert.deepEqual(
      (await allProducts(db)).find((p) => p.sku === 'KB-001'),
      {
        sku: 'KB-001',
        name: 'Mechanical keyboard',
        priceCents: 8900,
      },
    );
  });

  test('every column a reader reads as non-null is `not null` in the migrated schema', async () => {
    for (const reader of [orderRows, orderItemRows, customerRows, productRows]) {
      const rows = await db.query<{ column_name: string }>(
        `select column_name from information_schema.columns
         where table_schema = current_schema() and table_name = $1 and is_nullable = 'NO'`,
        [reader.table],
      );
      const notNull = new Set(rows.map((r) => r.column_name));
      assert.deepEqual(
        reader.nonNull.filter((column) => !notNull.has(column)),
        [],
        reader.table,
      );
    }
  });

  test('a retyped column fails on the first result, even an empty one, naming the column and its type', async () => {
    await drifted(['alter table orders alter column total_cents type bigint'], async (tx) => {
      await assert.rejects(
        listOrders(tx, { customerId: 'cus_none', limit: 5 }),
        new RowShapeError(
          'order rows do not have the shape store/rows.ts reads: column "total_cents" has type OID 20, not smallint or ' +
            'integer (21 or 23) (the result has id (25), customer_id (25), status (25), total_cents (20), version (23), ' +
            'created_at (1184), updated_at (1184))',
        ),
      );
    });
    await drifted(['alter table customers alter column name type jsonb using to_jsonb(name)'], async (tx) => {
      await assert.rejects(
        customerBySubject(tx, 'no-such-subject'),
        (error: Error) =>
          error instanceof RowShapeError && /column "name" has type OID 3802, not text/.test(error.message),
      );
    });
  });

  test('a renamed or missing column fails loudly: PostgreSQL itself refuses the statement', async () => {
    await drifted(['alter table orders rename column status to state'], async (tx) => {
      await assert.rejects(findOrder(tx, 'ord_rows1'), { code: '42703', message: 'column "status" does not exist' });
    });
    await drifted(['alter table order_items drop column qty'], async (tx) => {
      await assert.rejects(itemsOfOrders(tx, ['ord_rows1']), { code: '42703', message: 'column "qty" does not exist' });
    });
  });

  test('what the description cannot prove is checked on each row, naming the value', async () => {
    await drifted(
      [
        'alter table orders drop constraint orders_status_check',
        `update orders set status = 'refunded' where id = 'ord_rows1'`,
      ],
      async (tx) => {
        await assert.rejects(
          findOrder(tx, 'ord_rows1'),
          new RowShapeError('order row: status "refunded" is not an order status'),
        );
      },
    );
    await drifted([`update orders set updated_at = 'infinity' where id = 'ord_rows1'`], async (tx) => {
      await assert.rejects(
        findOrder(tx, 'ord_rows1'),
        new RowShapeError('order row: timestamp "infinity" is not in the API form'),
      );
    });
    await drifted(
      [
        'alter table customers alter column name drop not null',
        `update customers set name = null where id = 'cus_rows1'`,
      ],
      async (tx) => {
        await assert.rejects(
          customersByIds(tx, ['cus_rows1']),
          (error: Error) =>
            error instanceof RowShapeError && /column "name" reads as null, not string/.test(error.message),
        );
      },
    );
  });
});

test.each([
  ['2026-11-22 09:30:00.123456+00', '2026-11-22T09:30:00.123Z'],
  ['2026-11-22 09:30:00.1239+00', '2026-11-22T09:30:00.123Z'],
  ['2026-11-22 09:30:00.123+00', '2026-11-22T09:30:00.123Z'],
  ['2026-11-22 09:30:00.12+00', '2026-11-22T09:30:00.120Z'],
  ['2026-11-22 09:30:00.1+00', '2026-11-22T09:30:00.100Z'],
  ['2026-11-22 09:30:00+00', '2026-11-22T09:30:00.000Z'],
  ['2026-11-22 10:30:00.5+01', '2026-11-22T09:30:00.500Z'],
  ['infinity', 'infinity'],
])('PostgreSQL writes a timestamptz as %s; the API reads it as %s', (text, iso) => {
  assert.equal(isoTimestamp(text), iso);
});
