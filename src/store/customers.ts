import type { Customer } from '../domain/model.js';
import type { Queryable } from './db.js';
import { toCustomer } from './rows.js';

export async function customersByIds(db: Queryable, ids: readonly string[]): Promise<Customer[]> {
  const rows = await db.query('select id, subject, name, email from customers where id = any($1::text[])', [ids]);
  return rows.map(toCustomer);
}

export async function customerBySubject(db: Queryable, subject: string): Promise<Customer | null> {
  const rows = await db.query('select id, subject, name, email from customers where subject = $1', [subject]);
  return rows[0] ? toCustomer(rows[0]) : null;
}

/** Inserts the customer unless the subject already has one; either way returns the stored row. */
export async function insertCustomerForSubject(
  db: Queryable,
  customer: Customer & { subject: string },
): Promise<Customer> {
  const [inserted] = await db.query(
    `insert into customers (id, subject, name, email) values ($1, $2, $3, $4)
     on conflict (subject) do nothing
     returning id, subject, name, email`,
    [customer.id, customer.subject, customer.name, customer.email],
  );
  if (inserted) return toCustomer(inserted);
  // A concurrent first request of the same subject won. Its row committed after this statement's
  // snapshot was taken, so only a new statement can see it.
  const existing = await customerBySubject(db, customer.subject);
  if (!existing) throw new Error(`customer for subject ${customer.subject} was neither inserted nor found`);
  return existing;
}
