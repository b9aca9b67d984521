/**
 * The directory's nouns: the users and groups an organisation's directory (Okta, Entra, Keycloak) provisions over
 * SCIM, and the failures of provisioning. SCIM is the transport; these are what the rules are about.
 */

export interface PersonName {
  readonly formatted?: string;
  readonly familyName?: string;
  readonly givenName?: string;
  readonly middleName?: string;
  readonly honorificPrefix?: string;
  readonly honorificSuffix?: string;
}

export interface DirectoryEmail {
  readonly value: string;
  readonly type?: string;
  readonly primary?: boolean;
  readonly display?: string;
}

/** What the directory says about a person; every write replaces all of it. */
export interface DirectoryUserInput {
  readonly userName: string;
  /** Links the user to access tokens: the value of their SCIM_LINK_CLAIM (`sub` by default). */
  readonly externalId: string | null;
  readonly displayName: string | null;
  readonly name: PersonName | null;
  readonly emails: readonly DirectoryEmail[];
  readonly active: boolean;
}

export interface DirectoryUser extends DirectoryUserInput {
  readonly id: string;
  /** Bumped by every write: the entity tag's source. */
  readonly version: number;
  /** RFC 3339, as the store hands timestamps over. */
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface DirectoryGroupInput {
  readonly displayName: string;
  readonly externalId: string | null;
  /** Ids of the member users. */
  readonly members: readonly string[];
}

export interface DirectoryGroup {
  readonly id: string;
  readonly displayName: string;
  readonly externalId: string | null;
  readonly version: number;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** A group with its members, each with the user's display name (userName when it has none). */
export interface DirectoryGroupWithMembers extends DirectoryGroup {
  readonly members: readonly { readonly id: string; readonly display: string }[];
}

/** What a list may be narrowed by: a boolean expression over a resource's attributes. */
export type DirectoryQuery<F extends string> =
  | { readonly op: 'and' | 'or'; readonly of: readonly DirectoryQuery<F>[] }
  | { readonly op: 'not'; readonly of: DirectoryQuery<F> }
  | { readonly op: 'pr'; readonly field: F }
  | {
      readonly op: 'eq' | 'ne' | 'co' | 'sw' | 'ew' | 'gt' | 'ge' | 'lt' | 'le';
      readonly field: F;
      readonly value: string | boolean;
    };

export const USER_FIELDS = [
  'id',
  'userName',
  'externalId',
  'displayName',
  'active',
  'email',
  'created',
  'updated',
] as const;
export type UserField = (typeof USER_FIELDS)[number];
export const GROUP_FIELDS = ['id', 'displayName', 'externalId', 'member', 'created', 'updated'] as const;
export type GroupField = (typeof GROUP_FIELDS)[number];

/** A page of a list: `startIndex` is 1-based, as SCIM counts. */
export interface DirectoryPage<T> {
  readonly totalResults: number;
  readonly startIndex: number;
  readonly items: readonly T[];
}

export const PROVISIONING_FAILURES = ['NOT_FOUND', 'UNIQUENESS', 'INVALID_VALUE', 'PRECONDITION_FAILED'] as const;
export type ProvisioningFailure = (typeof PROVISIONING_FAILURES)[number];

/** An expected failure of a provisioning use case; the SCIM transport answers it as a SCIM error. */
export class ProvisioningError extends Error {
  constructor(
    readonly code: ProvisioningFailure,
    message: string,
  ) {
    super(message);
    this.name = 'ProvisioningError';
  }
}

export const invalidValue = (message: string) => new ProvisioningError('INVALID_VALUE', message);
