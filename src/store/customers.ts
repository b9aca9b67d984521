import type { Customer } from '../domain/model.js';
import type { Queryable } from './db.js';
import { customerRows } from './rows.js';

export async function customersByIds(db: Queryable, ids: readonly string[]): Promise<Customer[]> {
  return customerRows.all(
    await db.queryResult('select id, subject, name, email from customers where id = any($1::text[])', [ids]),
  );
}

export async function customerBySubject(db: Queryable, subject: string): Promise<Customer | null> {
  return customerRows.first(
    await db.queryResult('select id, subject, name, email from customers where subject = $1', [subject]),
  );
}

/** Inserts the customer unless the subject already has one; either way returns the stored row. */
export async function insertCustomerForSubject(
  db: Queryable,
  customer: Customer & { subject: string },
): Promise<Customer> {
  const inserted = customerRows.first(
    await db.queryResult(
      `insert into customers (id, subject, name, email) values ($1, $2, $3, $4)
       on conflict (subject) do nothing
       returning id, subject, name, email`,
      [customer.id, customer.subject, customer.name, customer.email],
    ),
  );
  if (inserted) return inserted;
  // A concurrent first request of the same subject won. Its row committed after this statement's
  // snapshot was taken, so only a new statement can see it.
  const existing = await customerBySubject(db, customer.subject);
  if (!existing) throw new Error(`customer for subject ${customer.subject} was neither inserted nor found`);
  return existing;
}
