import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { DomainError } from '../../src/domain/errors.js';
import { orderEtag } from '../../src/domain/etags.js';
import { ID_PATTERN, newId } from '../../src/domain/ids.js';
import { ORDER_STATUSES, type OrderStatus } from '../../src/domain/model.js';
import { assertTransition, priceLines } from '../../src/domain/orders.js';
import { isValidIdempotencyKey } from '../../src/domain/idempotencyKey.js';

const codeOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof DomainError);
    return error.code;
  }
  return 'OK';
};

describe('order rules', () => {
  test('allows exactly the documented transitions', () => {
    const allowed = new Set([
      'pending>paid',
      'paid>shipped',
      'shipped>delivered',
      'pending>cancelled',
      'paid>cancelled',
    ]);
    for (const from of ORDER_STATUSES) {
      for (const to of ORDER_STATUSES) {
        const expected = allowed.has(`${from}>${to}`) ? 'OK' : 'INVALID_TRANSITION';
        assert.equal(
          codeOf(() => assertTransition(from as OrderStatus, to)),
          expected,
          `${from} → ${to}`,
        );
      }
    }
    assert.equal(
      codeOf(() => assertTransition('pending', 'refunded')),
      'BAD_USER_INPUT',
    );
  });

  test('prices lines from the catalogue and totals them', () => {
    const prices = new Map([
      ['A', 250],
      ['B', 1000],
    ]);
    assert.deepEqual(
      priceLines(
        [
          { sku: 'A', qty: 4 },
          { sku: 'B', qty: 1 },
        ],
        prices,
      ),
      {
        lines: [
          { sku: 'A', qty: 4, unitPriceCents: 250 },
          { sku: 'B', qty: 1, unitPriceCents: 1000 },
        ],
        totalCents: 2000,
      },
    );
  });

  test('refuses totals that do not fit a GraphQL Int', () => {
    const prices = new Map([['GOLD', 2_000_000_000]]);
    assert.equal(
      codeOf(() => priceLines([{ sku: 'GOLD', qty: 2 }], prices)),
      'BAD_USER_INPUT',
    );
  });

  test('refuses more than 100 lines and fractional quantities', () => {
    const prices = new Map([['A', 1]]);
    const many = Array.from({ length: 101 }, () => ({ sku: 'A', qty: 1 }));
    assert.equal(
      codeOf(() => priceLines(many, prices)),
      'BAD_USER_INPUT',
    );
    assert.equal(
      codeOf(() => priceLines([{ sku: 'A', qty: 1.5 }], prices)),
      'BAD_USER_INPUT',
    );
  });
});

describe('ids and etags', () => {
  test('ids are prefixed and sort by creation time', () => {
    const earlier = newId('ord', Date.UTC(2026, 0, 1));
    const later = newId('ord', Date.UTC(2026, 0, 2));
    assert.match(earlier, ID_PATTERN);
    assert.match(newId('cus'), /^cus_/);
    assert.ok(earlier < later);
  });

  test('an etag names one version of one order', () => {
    assert.equal(orderEtag({ id: 'ord_x', version: 7 }), '"ord_x.v7"');
    assert.notEqual(orderEtag({ id: 'ord_x', version: 8 }), orderEtag({ id: 'ord_x', version: 7 }));
  });

  test('idempotency keys are 1 to 255 visible ASCII characters', () => {
    assert.equal(isValidIdempotencyKey('8e03978e-40d5-43e8-bc93-6894a57f9324'), true);
    assert.equal(isValidIdempotencyKey('k'.repeat(255)), true);
    assert.equal(isValidIdempotencyKey('k'.repeat(256)), false);
    assert.equal(isValidIdempotencyKey(''), false);
    assert.equal(isValidIdempotencyKey('has space'), false);
    assert.equal(isValidIdempotencyKey('tab\there'), false);
  });
});
