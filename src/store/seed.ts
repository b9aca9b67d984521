import { newId } from '../domain/ids.js';
import { ORDER_STATUSES, type OrderStatus } from '../domain/model.js';
import type { Database } from './db.js';

/** Demo customers who can sign in; their subjects are the embedded IdP's account ids. */
export const DEMO_CUSTOMERS = [
  { subject: 'alice', name: 'Alice Adams', email: 'alice@example.com' },
  { subject: 'bob', name: 'Bob Brown', email: 'bob@example.com' },
] as const;

const OTHER_CUSTOMERS = [
  'Chloe Chen',
  'Diego Díaz',
  'Emma Evans',
  'Farid Farouk',
  'Grace Green',
  'Hiro Honda',
  'Ines Ibáñez',
  'Jonas Jansen',
  'Kemi Kalu',
  'Lena Lindqvist',
];

const PRODUCTS: readonly [string, string, number][] = [
  ['KB-001', 'Mechanical keyboard', 8900],
  ['MS-002', 'Wireless mouse', 2900],
  ['MN-003', '27" monitor', 27900],
  ['HS-004', 'Headset', 5900],
  ['WC-005', 'Webcam', 4900],
  ['DK-006', 'Docking station', 15900],
  ['CB-007', 'USB-C cable', 1200],
  ['LS-008', 'Laptop stand', 3900],
  ['DL-009', 'Desk lamp', 3400],
  ['CH-010', 'Office chair', 24900],
  ['MP-011', 'Mouse pad', 900],
  ['SP-012', 'Speakers', 7900],
  ['MC-013', 'Microphone', 9900],
  ['HB-014', 'USB hub', 2500],
  ['SD-015', 'Portable SSD 1 TB', 10900],
  ['PB-016', 'Power bank', 3900],
  ['TB-017', 'Tablet sleeve', 1900],
  ['NB-018', 'Notebook', 600],
  ['PN-019', 'Pen set', 1100],
  ['BG-020', 'Laptop backpack', 6900],
];

export const SEED_ORDER_COUNT = 400;
const DAY_MS = 86_400_000;

/** Deterministic, so every fresh database holds the same demo data. */
function prng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Older orders have moved further along their lifecycle. */
function statusForAge(ageDays: number, r: number): OrderStatus {
  if (r < 0.06) return 'cancelled';
  if (ageDays > 14) return 'delivered';
  if (ageDays > 5) return r < 0.5 ? 'delivered' : 'shipped';
  if (ageDays > 1) return (['paid', 'shipped'] as const)[Math.floor(r * 2)]!;
  return r < 0.6 ? 'pending' : 'paid';
}

/** Fills an empty database with a catalogue, customers and orders spread over 90 days. */
export async function seed(db: Database, now = Date.now()): Promise<boolean> {
  return db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock(7251002)');
    const [{ n }] = (await tx.query<{ n: number }>('select count(*)::int as n from products')) as [{ n: number }];
    if (n > 0) return false;
    const random = prng(20261122);

    await tx.query(
      'insert into products (sku, name, price_cents) select * from unnest($1::text[], $2::text[], $3::int[])',
      [PRODUCTS.map((p) => p[0]), PRODUCTS.map((p) => p[1]), PRODUCTS.map((p) => p[2])],
    );

    const customers = [
      ...DEMO_CUSTOMERS.map((c) => ({ ...c, id: newId('cus', now - 120 * DAY_MS) })),
      ...OTHER_CUSTOMERS.map((name) => ({
        subject: null,
        name,
        email: `${name.split(' ')[0]!.toLowerCase()}@example.com`,
        id: newId('cus', now - 120 * DAY_MS),
      })),
    ];
    await tx.query(
      `insert into customers (id, subject, name, email, created_at)
       select *, $5::timestamptz from unnest($1::text[], $2::text[], $3::text[], $4::text[])`,
      [
        customers.map((c) => c.id),
        customers.map((c) => c.subject),
        customers.map((c) => c.name),
        customers.map((c) => c.email),
        new Date(now - 120 * DAY_MS),
      ],
    );

    const orders: unknown[][] = [[], [], [], [], [], [], []];
    const items: unknown[][] = [[], [], [], [], []];
    for (let i = 0; i < SEED_ORDER_COUNT; i++) {
      const created = now - Math.floor(random() * 90 * DAY_MS) - 60_000;
      // Alice and Bob own a good share so that signing in as them shows real lists.
      const customer =
        customers[i % 5 === 0 ? 0 : i % 5 === 1 ? 1 : 2 + Math.floor(random() * OTHER_CUSTOMERS.length)]!;
      const status = statusForAge((now - created) / DAY_MS, random());
      const id = newId('ord', created);
      const lineCount = 1 + Math.floor(random() * 4);
      const skus = new Set<number>();
      while (skus.size < lineCount) skus.add(Math.floor(random() * PRODUCTS.length));
      let total = 0;
      let line = 0;
      for (const p of skus) {
        const qty = 1 + Math.floor(random() * 3);
        const [sku, , price] = PRODUCTS[p]!;
        total += qty * price;
        [id, ++line, sku, qty, price].forEach((v, k) => items[k]!.push(v));
      }
      const versions = 1 + ORDER_STATUSES.indexOf(status === 'cancelled' ? 'paid' : status);
      const updated = status === 'pending' ? created : Math.min(now, created + versions * 3_600_000);
      [id, customer.id, status, total, versions, new Date(created), new Date(updated)].forEach((v, k) =>
        orders[k]!.push(v),
      );
    }
    await tx.query(
      `insert into orders (id, customer_id, status, total_cents, version, created_at, updated_at)
       select * from unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::timestamptz[], $7::timestamptz[])`,
      orders,
    );
    await tx.query(
      `insert into order_items (order_id, line_no, sku, qty, unit_price_cents)
       select * from unnest($1::text[], $2::smallint[], $3::text[], $4::int[], $5::int[])`,
      items,
    );
    return true;
  });
}
