import { newId } from './ids.js';
import type { Loaders } from './loaders.js';
import type { Customer } from './model.js';
import type { CustomerRepository } from './ports.js';
import { requireScope, SCOPES, type Principal, type User } from './policy.js';

const MAX_CACHED_SUBJECTS = 10_000;

export function createCustomerService(repo: CustomerRepository) {
  // Customers are never deleted or re-linked, so subject → id is safe to remember.
  const idBySubject = new Map<string, string>();

  const service = {
    /** The calling user's customer id, creating the customer on the subject's first request. */
    async idFor(user: User): Promise<string> {
      const cached = idBySubject.get(user.subject);
      if (cached) return cached;
      const customer =
        (await repo.bySubject(user.subject)) ??
        (await repo.insertForSubject({
          id: newId('cus'),
          subject: user.subject,
          name: user.name?.trim() || user.subject,
          email: user.email ?? null,
        }));
      if (idBySubject.size >= MAX_CACHED_SUBJECTS) idBySubject.clear();
      idBySubject.set(user.subject, customer.id);
      return customer.id;
    },

    /** The customer id this process already knows a subject by, without asking the database. */
    knownIdOf: (subject: string): string | undefined => idBySubject.get(subject),

    /** The caller's own customer record. */
    async of(principal: Principal, loaders: Loaders): Promise<Customer | null> {
      const user = requireScope(principal, SCOPES.read);
      return loaders.customer.load(await service.idFor(user));
    },
  };
  return service;
}

export type CustomerService = ReturnType<typeof createCustomerService>;
