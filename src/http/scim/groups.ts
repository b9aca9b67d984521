import express, { type Request } from 'express';
import type {
  DirectoryGroup,
  DirectoryGroupInput,
  DirectoryGroupWithMembers,
  GroupField,
} from '../../domain/directory.js';
import type { Provisioning } from '../../domain/provisioning.js';
import { ScimError } from '../problems/index.js';
import { checkSchemas, GROUP, isObject, resourceValues } from './attributes.js';
import { filterQuery, type Filterable } from './filters.js';
import { applyPatch } from './patch.js';
import { metaOf, pageParams, preconditionOf, projectionOf, queryValue, sendList, sendResource } from './resources.js';
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
  if (!isObject(body)) throw new ScimError('invalidSyntax', 'The body must be a Group resource (a JSON object).');
  const { values, id, schemas } = resourceValues(GROUP, body);
  checkSchemas(GROUP, schemas);
  if (current && id !== undefined && id !== current.id) throw new ScimError('mutability', 'id cannot be changed.');
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

/** /Groups: list by displayName and others, create, and read, replace, patch (members too) and delete one. */
export function groupsRouter(provisioning: Provisioning, base: string): express.Router {
  const { groups } = provisioning;
  const router = express.Router();
  const show = (req: Request, group: DirectoryGroup) => projectionOf(req, URN.group).apply(groupResource(group, base));

  router.get('/', async (req, res) => {
    const filter = queryValue(req, 'filter');
    const members = projectionOf(req, URN.group).wants('members');
    const page = await groups.list(filter === undefined ? null : filterQuery(filter, FILTERABLE, URN.group), {
      ...pageParams(req),
      members,
    });
    sendList(
      res,
      page,
      page.items.map((g) => show(req, g)),
    );
  });

  router.post('/', async (req, res) => {
    const group = await groups.create(groupInput(req.body, null));
    sendResource(req, res, 201, groupResource(group, base), show(req, group));
  });

  router.get('/:id', async (req, res) => {
    const members = projectionOf(req, URN.group).wants('members');
    const group = await groups.get(req.params.id!, { members });
    sendResource(req, res, 200, groupResource(group, base), show(req, group));
  });

  router.put('/:id', async (req, res) => {
    const group = await groups.modify(req.params.id!, (current) => groupInput(req.body, current), preconditionOf(req));
    sendResource(req, res, 200, groupResource(group, base), show(req, group));
  });

  router.patch('/:id', async (req, res) => {
    const group = await groups.modify(
      req.params.id!,
      (current) => groupInput(applyPatch(GROUP, patchable(current), req.body), current),
      preconditionOf(req),
    );
    sendResource(req, res, 200, groupResource(group, base), show(req, group));
  });

  router.delete('/:id', async (req, res) => {
    await groups.remove(req.params.id!, preconditionOf(req));
    res.status(204).end();
  });

  return router;
}
