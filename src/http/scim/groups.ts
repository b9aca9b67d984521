import type express from 'express';
import type {
  DirectoryGroup,
  DirectoryGroupInput,
  DirectoryGroupWithMembers,
  GroupField,
} from '../../domain/directory.js';
import type { Provisioning } from '../../domain/provisioning.js';
import { ScimError } from '../problems/index.js';
import { bodyValues, GROUP } from './attributes.js';
import type { Filterable } from './filters.js';
import { applyPatch } from './patch.js';
import { resourceRouter } from './resourceRoutes.js';
import { metaOf } from './resources.js';
import { URN } from './schemas.js';

const FILTERABLE: Filterable<GroupField> = {
  id: { field: 'id', kind: 'text' },
  displayname: { field: 'displayName', kind: 'text' },
  externalid: { field: 'externalId', kind: 'text' },
  members: { field: 'member', kind: 'text' },
  'members.value': { field: 'member', kind: 'text' },
  'meta.created': { field: 'created', kind: 'timestamp' },
  'meta.lastmodified': { field: 'updated', kind: 'timestamp' },
};

const hasMembers = (group: DirectoryGroup): group is DirectoryGroupWithMembers => 'members' in group;

/** A group as SCIM shows it (RFC 7643 §4.2); `members` only when they were read. */
export function groupResource(group: DirectoryGroup, base: string) {
  return {
    schemas: [URN.group],
    id: group.id,
    ...(group.externalId !== null ? { externalId: group.externalId } : {}),
    displayName: group.displayName,
    ...(hasMembers(group)
      ? {
          members: group.members.map((m) => ({
            value: m.id,
            display: m.display,
            type: 'User',
            $ref: `${base}/Users/${m.id}`,
          })),
        }
      : {}),
    meta: metaOf('Group', group, `${base}/Groups/${group.id}`),
  };
}

/** What PATCH applies its operations to: members by id alone, as operations name them. */
function patchable(group: DirectoryGroupWithMembers): Record<string, unknown> {
  return {
    schemas: [URN.group],
    id: group.id,
    ...(group.externalId !== null ? { externalId: group.externalId } : {}),
    displayName: group.displayName,
    members: group.members.map((m) => ({ value: m.id })),
  };
}

/** A Group body (POST, PUT, or the result of a PATCH): its name, externalId and member user ids. */
export function groupInput(body: unknown, current: DirectoryGroup | null): DirectoryGroupInput {
  const values = bodyValues(GROUP, body, current);
  if (typeof values.displayName !== 'string') throw new ScimError('invalidValue', 'displayName is required.');
  const members = (values.members as Record<string, unknown>[] | null | undefined) ?? [];
  return {
    displayName: values.displayName,
    externalId: typeof values.externalId === 'string' ? values.externalId : null,
    members: members.map((m) => {
      if (typeof m.type === 'string' && m.type.toLowerCase() !== 'user') {
        throw new ScimError('invalidValue', 'Only users can be members of a group here.');
      }
      if (typeof m.value !== 'string') throw new ScimError('invalidValue', 'Every member needs a value (a user id).');
      return m.value;
    }),
  };
}

/** /Groups: the directory's groups and their members. */
export function groupsRouter(provisioning: Provisioning, base: string): express.Router {
  const { groups } = provisioning;
  return resourceRouter<DirectoryGroup, DirectoryGroupWithMembers, DirectoryGroupInput, GroupField>({
    schema: URN.group,
    filterable: FILTERABLE,
    list: (query, opts) => groups.list(query, opts),
    get: (id, opts) => groups.get(id, opts),
    create: (input) => groups.create(input),
    modify: (id, change, precondition) => groups.modify(id, change, precondition),
    remove: (id, precondition) => groups.remove(id, precondition),
    show: (group) => groupResource(group, base),
    input: groupInput,
    patched: (current, body) => applyPatch(GROUP, patchable(current), body),
  });
}
