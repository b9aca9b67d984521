import express, { type Request } from 'express';
import type {
  DirectoryEmail,
  DirectoryUser,
  DirectoryUserInput,
  PersonName,
  UserField,
} from '../../domain/directory.js';
import type { Provisioning } from '../../domain/provisioning.js';
import { ScimError } from '../problems/index.js';
import { checkSchemas, isObject, resourceValues, USER } from './attributes.js';
import { filterQuery, type Filterable } from './filters.js';
import { applyPatch } from './patch.js';
import { metaOf, pageParams, preconditionOf, projectionOf, queryValue, sendList, sendResource } from './resources.js';
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
  if (!isObject(body)) throw new ScimError('invalidSyntax', 'The body must be a User resource (a JSON object).');
  const { values, id, schemas } = resourceValues(USER, body);
  checkSchemas(USER, schemas);
  if (current && id !== undefined && id !== current.id) throw new ScimError('mutability', 'id cannot be changed.');
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

/** /Users: list with filter and pages, create, and read, replace, patch and delete one. */
export function usersRouter(provisioning: Provisioning, base: string): express.Router {
  const { users } = provisioning;
  const router = express.Router();
  const show = (req: Request, user: DirectoryUser) => projectionOf(req, URN.user).apply(userResource(user, base));

  router.get('/', async (req, res) => {
    const filter = queryValue(req, 'filter');
    const { startIndex, count } = pageParams(req);
    const page = await users.list(
      filter === undefined ? null : filterQuery(filter, FILTERABLE, URN.user),
      startIndex,
      count,
    );
    sendList(
      res,
      page,
      page.items.map((u) => show(req, u)),
    );
  });

  router.post('/', async (req, res) => {
    const user = await users.create(userInput(req.body, null));
    sendResource(req, res, 201, userResource(user, base), show(req, user));
  });

  router.get('/:id', async (req, res) => {
    const user = await users.get(req.params.id!);
    sendResource(req, res, 200, userResource(user, base), show(req, user));
  });

  router.put('/:id', async (req, res) => {
    const user = await users.modify(req.params.id!, (current) => userInput(req.body, current), preconditionOf(req));
    sendResource(req, res, 200, userResource(user, base), show(req, user));
  });

  router.patch('/:id', async (req, res) => {
    const user = await users.modify(
      req.params.id!,
      (current) => userInput(applyPatch(USER, patchable(current, base), req.body), current),
      preconditionOf(req),
    );
    sendResource(req, res, 200, userResource(user, base), show(req, user));
  });

  router.delete('/:id', async (req, res) => {
    await users.remove(req.params.id!, preconditionOf(req));
    res.status(204).end();
  });

  return router;
}
