import { DIRECTORY_PAGE, MAX_EMAILS } from '../../domain/provisioning.js';

export const URN = {
  user: 'urn:ietf:params:scim:schemas:core:2.0:User',
  group: 'urn:ietf:params:scim:schemas:core:2.0:Group',
  enterpriseUser: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User',
  listResponse: 'urn:ietf:params:scim:api:messages:2.0:ListResponse',
  patchOp: 'urn:ietf:params:scim:api:messages:2.0:PatchOp',
  serviceProviderConfig: 'urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig',
  resourceType: 'urn:ietf:params:scim:schemas:core:2.0:ResourceType',
  schema: 'urn:ietf:params:scim:schemas:core:2.0:Schema',
} as const;

/** Most operations one PATCH may carry. */
export const MAX_PATCH_OPERATIONS = 1000;
/**
 * Total characters of a PATCH's paths: a thousand member removals by value filter (Okta's
 * `members[value eq "usr_…"]`, 47 characters) fit twice over; what is past it would hold the event loop parsing
 * and matching filters.
 */
export const MAX_PATCH_PATH_CHARACTERS = 100_000;
/**
 * Most filter work one PATCH may do: for each operation whose path has a value filter, the filter's comparisons times
 * the values of the attribute it filters (a group's members). It runs under the directory's write lock, so it bounds
 * how long one request holds every replica's directory writes and this replica's event loop.
 */
export const MAX_PATCH_FILTER_WORK = 500_000;
/** Largest request body /scim/v2 reads. */
export const SCIM_BODY_LIMIT = '512kb';

export interface Attribute {
  readonly name: string;
  readonly type: 'string' | 'boolean' | 'complex' | 'reference' | 'dateTime';
  readonly multiValued: boolean;
  readonly description: string;
  readonly required: boolean;
  readonly caseExact: boolean;
  readonly mutability: 'readOnly' | 'readWrite' | 'immutable' | 'writeOnly';
  readonly returned: 'always' | 'never' | 'default' | 'request';
  readonly uniqueness: 'none' | 'server' | 'global';
  readonly subAttributes?: readonly Attribute[];
  readonly referenceTypes?: readonly string[];
}

const text = (name: string, description: string, more: Partial<Attribute> = {}): Attribute => ({
  name,
  type: 'string',
  multiValued: false,
  description,
  required: false,
  caseExact: false,
  mutability: 'readWrite',
  returned: 'default',
  uniqueness: 'none',
  ...more,
});

/** The User attributes this service provider keeps: what /Schemas says, truthfully. */
export const USER_ATTRIBUTES: readonly Attribute[] = [
  text('userName', 'Unique identifier for the user, compared without regard to case.', {
    required: true,
    uniqueness: 'server',
  }),
  text('name', "The components of the user's name.", {
    type: 'complex',
    subAttributes: [
      text('formatted', 'The full name, formatted for display.'),
      text('familyName', 'The family name.'),
      text('givenName', 'The given name.'),
      text('middleName', 'The middle name.'),
      text('honorificPrefix', 'The honorific prefix, such as Ms.'),
      text('honorificSuffix', 'The honorific suffix, such as III.'),
    ],
  }),
  text('displayName', 'The name of the user, suitable for display.'),
  {
    ...text('emails', `Email addresses for the user (at most ${MAX_EMAILS}; at most one primary).`),
    type: 'complex',
    multiValued: true,
    subAttributes: [
      text('value', 'The email address.'),
      text('display', 'A human-readable name.'),
      text('type', 'A label such as work or home.'),
      { ...text('primary', 'Whether this is the primary address.'), type: 'boolean' },
    ],
  },
  {
    ...text('active', 'Whether the user may use the service. False ends their tokens, sessions and streams.'),
    type: 'boolean',
  },
];

export const GROUP_ATTRIBUTES: readonly Attribute[] = [
  text('displayName', `A name for the group, unique here; the group named by SCIM_STAFF_GROUP grants staff.`, {
    required: true,
    uniqueness: 'server',
  }),
  {
    ...text('members', 'The users in the group (groups cannot be members).'),
    type: 'complex',
    multiValued: true,
    subAttributes: [
      text('value', 'The id of the member user.', { caseExact: true, mutability: 'immutable' }),
      {
        ...text('$ref', 'The URI of the member user.', { caseExact: true, mutability: 'immutable' }),
        type: 'reference',
        referenceTypes: ['User'],
      },
      text('display', "The member user's display name.", { mutability: 'readOnly' }),
      text('type', 'Always User.', { mutability: 'immutable' }),
    ],
  },
];

export function schemaDocuments(base: string) {
  const schema = (id: string, name: string, description: string, attributes: readonly Attribute[]) => ({
    schemas: [URN.schema],
    id,
    name,
    description,
    attributes,
    meta: { resourceType: 'Schema', location: `${base}/Schemas/${id}` },
  });
  return [
    schema(URN.user, 'User', 'User accounts of the orders service', USER_ATTRIBUTES),
    schema(URN.group, 'Group', 'Groups of users; one of them can grant the staff role', GROUP_ATTRIBUTES),
  ];
}

export function resourceTypeDocuments(base: string) {
  const type = (id: 'User' | 'Group', endpoint: string, schema: string) => ({
    schemas: [URN.resourceType],
    id,
    name: id,
    endpoint,
    description: id === 'User' ? 'User account' : 'Group',
    schema,
    schemaExtensions: [],
    meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/${id}` },
  });
  return [type('User', '/Users', URN.user), type('Group', '/Groups', URN.group)];
}

/** What this service provider supports, as RFC 7643 §5 says it (RFC 7644 §4). */
export function serviceProviderConfig(base: string) {
  return {
    schemas: [URN.serviceProviderConfig],
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: DIRECTORY_PAGE.max },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: true },
    authenticationSchemes: [
      {
        type: 'oauthbearertoken',
        name: 'OAuth Bearer Token',
        description:
          'Authorization: Bearer with the shared secret SCIM_TOKEN, or an access token from the issuer carrying SCIM_SCOPE.',
        specUri: 'https://www.rfc-editor.org/rfc/rfc6750',
        primary: true,
      },
    ],
    meta: { resourceType: 'ServiceProviderConfig', location: `${base}/ServiceProviderConfig` },
  };
}
