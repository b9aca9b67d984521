import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { ZodError } from 'zod';
import { toCustomer, toOrder, toOrderItem, toProduct } from '../../src/store/rows.js';
import { isoTimestamp } from '../../src/store/timestamps.js';

/**
 * Rows are checked where they enter the program: by ajv's compiled check of each row schema on the way every request
 * takes, by zod itself for anything that check does not pass. Either way a row reads the same, and a row that has
 * drifted from the schema fails loudly.
 */
const order = {
  id: 'ord_1',
  customer_id: 'cus_1',
  status: 'paid',
  total_cents: 1250,
  version: 3,
  created_at: '2026-11-22T09:30:00.123Z',
  updated_at: '2026-11-22T09:31:00.000Z',
};
const read = {
  id: 'ord_1',
  customerId: 'cus_1',
  status: 'paid',
  totalCents: 1250,
  version: 3,
  createdAt: '2026-11-22T09:30:00.123Z',
  updatedAt: '2026-11-22T09:31:00.000Z',
};

describe('database rows', () => {
  test('a row as the driver gives it reads as the domain model, and columns the model lacks are left out', () => {
    assert.deepEqual(toOrder(order), read);
    assert.deepEqual(toOrder({ ...order, note: 'not in the schema' }), read);
    assert.deepEqual(toCustomer({ id: 'cus_1', subject: null, name: 'Alice', email: null }), {
      id: 'cus_1',
      subject: null,
      name: 'Alice',
      email: null,
    });
    assert.deepEqual(toOrderItem({ order_id: 'ord_1', line_no: 1, sku: 'SKU-1', qty: 2, unit_price_cents: 500 }), {
      orderId: 'ord_1',
      lineNo: 1,
      sku: 'SKU-1',
      qty: 2,
      unitPriceCents: 500,
    });
    assert.deepEqual(toProduct({ sku: 'SKU-1', name: 'Mug', price_cents: 500 }), {
      sku: 'SKU-1',
      name: 'Mug',
      priceCents: 500,
    });
  });

  test('an integer a driver sends as text (int8, numeric) is still read as a number, as zod coerces it', () => {
    assert.deepEqual(toOrder({ ...order, total_cents: '1250', version: '3' }), read);
  });

  test.each([
    ['an unknown status', { status: 'PAID' }, 'status'],
    ['a fractional amount', { total_cents: 12.5 }, 'total_cents'],
    ['a timestamp not in the API form', { created_at: '2026-11-22 09:30:00+00' }, 'created_at'],
    ['a missing id', { id: undefined }, 'id'],
    ['a null customer', { customer_id: null }, 'customer_id'],
  ])('a row with %s fails loudly, naming the column', (_what, change, column) => {
    assert.throws(
      () => toOrder({ ...order, ...change }),
      (error: unknown) => error instanceof ZodError && error.issues.some((issue) => issue.path[0] === column),
    );
  });

  test('a customer whose name is not text fails loudly', () => {
    assert.throws(() => toCustomer({ id: 'cus_1', subject: null, name: 42, email: null }), ZodError);
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
});
