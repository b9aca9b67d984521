import { DomainError } from './errors.js';

export type Principal =
  | { readonly kind: 'anonymous' }
  | {
      readonly kind: 'user';
      /** The OIDC `sub` of whoever is calling. */
      readonly subject: string;
      readonly scopes: ReadonlySet<string>;
      readonly roles: ReadonlySet<string>;
      readonly name?: string;
      readonly email?: string;
      /** The OAuth client the credential was issued to (`client_id`, else `azp`), when it says. */
      readonly clientId?: string;
      /** When the credential stops being valid (ms since the epoch); long-lived streams end then. */
      readonly expiresAt?: number;
      /** When the access token was issued (its `iat`, ms since the epoch), when it says. */
      readonly issuedAt?: number;
      /**
       * What the directory (SCIM) knows this person by: the value of SCIM_LINK_CLAIM (`sub` by default), which a
       * directory user's externalId names. Absent when the credential does not carry that claim.
       */
      readonly directoryKey?: string;
    };

export type User = Extract<Principal, { kind: 'user' }>;

export const ANONYMOUS: Principal = Object.freeze({ kind: 'anonymous' });

export const SCOPES = { read: 'orders:read', write: 'orders:write' } as const;
export const STAFF_ROLE = 'staff';

export function isStaff(user: User): boolean {
  return user.roles.has(STAFF_ROLE);
}

/** A valid login is not permission: reads need `orders:read`, writes `orders:write`. */
export function requireScope(principal: Principal, scope: (typeof SCOPES)[keyof typeof SCOPES]): User {
  if (principal.kind !== 'user') {
    throw new DomainError('UNAUTHENTICATED', 'Sign in or send a Bearer access token to see order data.');
  }
  if (!principal.scopes.has(scope)) {
    throw new DomainError('INSUFFICIENT_SCOPE', `The access token lacks the ${scope} scope.`, { scope });
  }
  return principal;
}
