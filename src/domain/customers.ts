import type { Queryable } from '../store/db.js';
import { customerBySubject, insertCustomerForSubject } from '../store/customers.js';
import { newId } from './ids.js';
import type { Loaders } from './loaders.js';
import { requireScope, SCOPES, type Principal, type User } from './policy.js';

export interface Customer {
  readonly id: string;
  /** The OIDC `sub` this customer signs in as; null for customers imported without a login. */
  readonly subject: string | null;
  readonly name: string;
  readonly email: string | null;
}

const MAX_CACHED_SUBJECTS = 10_000;

export function createCustomerService(db: Queryable) {
  // Customers are never deleted or re-linked, so subject → id is safe to remember.
  const idBySubject = new Map<string, string>();

  const service = {
    /** The calling user's customer id, creating the customer on the subject's first request. */
    async idFor(user: User): Promise<string> {
      const cached = idBySubject.get(user.subject);
      if (cached) return cached;
      const customer =
        (await customerBySubject(db, user.subject)) ??
        (await insertCustomerForSubject(db, {
          id: newId('cus'),
          subject: user.subject,
          name: user.name?.trim() || user.subject,
          email: user.email ?? null,
        }));
      if (idBySubject.size >= MAX_CACHED_SUBJECTS) idBySubject.clear();
      idBySubject.set(user.subject, customer.id);
      return customer.id;
    },

    /** The caller's own customer record. */
    async of(principal: Principal, loaders: Loaders): Promise<Customer | null> {
      const user = requireScope(principal, SCOPES.read);
      return loaders.customer.load(await service.idFor(user));
    },
  };
  return service;
}

export type CustomerService = ReturnType<typeof createCustomerService>;
