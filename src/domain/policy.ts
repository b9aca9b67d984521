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
      /**
       * Whether the credential itself carried the staff role, set when the directory's staff group changed the roles
       * it was admitted with: what decides again once the directory has no staff group.
       */
      readonly staffByToken?: boolean;
      /** `acr`: the authentication context class the user signed in under (OpenID Connect Core §2). */
      readonly acr?: string;
      /** `amr`: how the user signed in, as RFC 8176 names it (`pwd`, `otp`, `hwk`, `mfa`…). */
      readonly amr?: readonly string[];
      /** `auth_time`: when the user last actively signed in (ms since the epoch). */
      readonly authTime?: number;
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

/**
 * This product's authentication context classes, as the embedded IdP issues them and the compose stack's Keycloak
 * maps its levels of authentication to (`acr.loa.map`): a password alone, or two factors (a password and a TOTP code
 * or passkey, or a passkey that verified its user).
 */
export const ACR = { password: 'urn:orders:acr:pwd', mfa: 'urn:orders:acr:mfa' } as const;

/** One `acr` value: visible ASCII without quotes or backslashes, as it goes into a quoted challenge parameter. */
const ACR_VALUE = /^[\x21\x23-\x5b\x5d-\x7e]{1,255}$/;
const MAX_ACR_VALUES = 10;

/** A space-separated `acr_values` list (RFC 9470, OpenID Connect Core §3.1.2.1), or null when malformed. */
export function parseAcrValues(value: string): string[] | null {
  const values = value.trim().split(/ +/);
  return values.length <= MAX_ACR_VALUES && values.every((v) => ACR_VALUE.test(v)) ? values : null;
}

/**
 * RFC 9470 step-up: what the staff role's writes ask of the sign-in behind a credential. Null when the rule is off
 * (STEP_UP_ACR=off, for an issuer that cannot say how the user signed in).
 */
export interface StepUpRule {
  /** The `acr` values that are strong enough, in order of preference: RFC 9470's `acr_values`. */
  readonly acrValues: readonly string[];
  /** The longest time since `auth_time`, in seconds: RFC 9470's `max_age`. */
  readonly maxAgeSeconds: number;
}

/** What the refusal tells the client to ask its authorization server for (RFC 9470 §3). */
export interface StepUpChallenge {
  /** Space-separated, as the `acr_values` authorization request parameter takes them. */
  readonly acrValues: string;
  readonly maxAge: number;
}

/** The sign-in behind the credential meets the rule: an `acr` it accepts and an `auth_time` within `max_age`. */
export function meetsStepUp(user: User, rule: StepUpRule | null, now: number = Date.now()): boolean {
  if (!rule) return true;
  return stepUpShortfall(user, rule, now) === null;
}

function stepUpShortfall(user: User, rule: StepUpRule, now: number): 'acr' | 'max_age' | null {
  if (user.acr === undefined || !rule.acrValues.includes(user.acr)) return 'acr';
  // auth_time a little in the future (the issuer's clock ahead of ours) counts as now.
  if (user.authTime === undefined || now - user.authTime > rule.maxAgeSeconds * 1000) return 'max_age';
  return null;
}

/**
 * The one step-up rule. Every use of the staff role's powers calls it: status changes, cancelling, deleting or
 * editing someone else's order, placing an order for someone else — and, once webhooks land (issue 23), managing
 * webhook endpoints. What a customer may do to their own orders never needs it.
 */
export function requireStepUp(user: User, rule: StepUpRule | null, now: number = Date.now()): void {
  if (!rule) return;
  const shortfall = stepUpShortfall(user, rule, now);
  if (shortfall === null) return;
  const challenge: StepUpChallenge = { acrValues: rule.acrValues.join(' '), maxAge: rule.maxAgeSeconds };
  throw new DomainError(
    'INSUFFICIENT_USER_AUTHENTICATION',
    shortfall === 'acr'
      ? 'Staff changes need a sign-in with a second factor; sign in again with acr_values and max_age as given.'
      : `Staff changes need a sign-in within the last ${rule.maxAgeSeconds} seconds; sign in again with a second factor.`,
    { stepUp: challenge },
  );
}
