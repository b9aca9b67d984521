import type express from 'express';
import type {
  DirectoryEmail,
  DirectoryUser,
  DirectoryUserInput,
  PersonName,
  UserField,
} from '../../domain/directory.js';
import type { Provisioning } from '../../domain/provisioning.js';
import { ScimError } from '../problems/index.js';
import { bodyValues, USER } from './attributes.js';
import type { Filterable } from './filters.js';
import { applyPatch } from './patch.js';
import { resourceRouter } from './resourceRoutes.js';
import { metaOf } from './resources.js';
import { URN } from './schemas.js';

const FILTERABLE: Filterable<UserField> = {
  id: { field: 'id', kind: 'text' },
  username: { field: 'userName', kind: 'text' },
  externalid: { field: 'externalId', kind: 'text' },
  displayname: { field: 'displayName', kind: 'text' },
  active: { field: 'active', kind: 'boolean' },
  emails: { field: 'email', kind: 'text' },
  'emails.value': { field: 'email', kind: 'text' },
  'meta.created': { field: 'created', kind: 'timestamp' },
  'meta.lastmodified': { field: 'updated', kind: 'timestamp' },
};

/** A user as SCIM shows it (RFC 7643 §4.1); unassigned attributes are left out. */
export function userResource(user: DirectoryUser, base: string) {
  return {
    schemas: [URN.user],
    id: user.id,
    ...(user.externalId !== null ? { externalId: user.externalId } : {}),
    userName: user.userName,
    ...(user.name !== null ? { name: user.name } : {}),
    ...(user.displayName !== null ? { displayName: user.displayName } : {}),
    ...(user.emails.length ? { emails: user.emails } : {}),
    active: user.active,
    meta: metaOf('User', user, `${base}/Users/${user.id}`),
  };
}

/** What PATCH applies its operations to: the representation without `meta`, which no operation may touch. */
function patchable(user: DirectoryUser, base: string): Record<string, unknown> {
  const { meta: _meta, ...rest } = userResource(user, base);
  return structuredClone(rest);
}

const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/**
 * A User body (POST, PUT, or the result of a PATCH) as what the directory says about the person. `current` is the
 * user a PUT or PATCH replaces: its id is the only one the body may carry, and `active` left out keeps its value,
 * so a PUT that forgets `active` never reactivates anyone. A POST without `active` creates an active user.
 */
export function userInput(body: unknown, current: DirectoryUser | null): DirectoryUserInput {
  const values = bodyValues(USER, body, current);
  if (typeof values.userName !== 'string') throw new ScimError('invalidValue', 'userName is required.');
  const name = values.name as PersonName | null | undefined;
  const emails = (values.emails as Record<string, unknown>[] | null | undefined) ?? [];
  return {
    userName: values.userName,
    externalId: str(values.externalId),
    displayName: str(values.displayName),
    name: name && Object.keys(name).length ? name : null,
    emails: emails.map((e): DirectoryEmail => {
      if (typeof e.value !== 'string') throw new ScimError('invalidValue', 'Every email needs a value.');
      return {
        value: e.value,
        ...(typeof e.type === 'string' ? { type: e.type } : {}),
        ...(typeof e.primary === 'boolean' ? { primary: e.primary } : {}),
        ...(typeof e.display === 'string' ? { display: e.display } : {}),
      };
    }),
    active: typeof values.active === 'boolean' ? values.active : (current?.active ?? true),
  };
}

/** /Users: the directory's people. */
export function usersRouter(provisioning: Provisioning, base: string): express.Router {
  const { users } = provisioning;
  return resourceRouter<DirectoryUser, DirectoryUser, DirectoryUserInput, UserField>({
    schema: URN.user,
    filterable: FILTERABLE,
    list: (query, opts) => users.list(query, opts),
    get: (id) => users.get(id),
    create: (input) => users.create(input),
    modify: (id, change, precondition) => users.modify(id, change, precondition),
    remove: (id, precondition) => users.remove(id, precondition),
    show: (user) => userResource(user, base),
    input: userInput,
    patched: (current, body) => applyPatch(USER, patchable(current, base), body),
  });
}
