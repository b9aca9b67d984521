import express from 'express';
import type { DirectoryPage, DirectoryQuery } from '../../domain/directory.js';
import type { Precondition } from '../../domain/etags.js';
import { filterQuery, type Filterable } from './filters.js';
import { pageParams, preconditionOf, projectionOf, queryValue, sendList, sendResource } from './resources.js';

type Shown = Record<string, unknown> & { readonly meta: { readonly version: string; readonly location: string } };

/**
 * One SCIM resource type's use cases and representation: what its routes need. `C` is what a write sees of the
 * current resource, `I` what it is replaced with.
 */
export interface ResourceType<T, C, I, F extends string> {
  /** The core schema URN, which `attributes` and filters may prefix attribute names with. */
  readonly schema: string;
  readonly filterable: Filterable<F>;
  /** `members`: whether the response shows them (only groups have them), so that nobody reads them for nothing. */
  list(
    query: DirectoryQuery<F> | null,
    opts: { startIndex?: number; count?: number; members: boolean },
  ): Promise<DirectoryPage<T>>;
  get(id: string, opts: { members: boolean }): Promise<T>;
  create(input: I): Promise<T>;
  modify(id: string, change: (current: C) => I, precondition?: Precondition): Promise<T>;
  remove(id: string, precondition?: Precondition): Promise<void>;
  /** The SCIM representation, with `meta`. */
  show(resource: T): Shown;
  /** A POST or PUT body (or a patched representation) as the input of a write; `current` is what it replaces. */
  input(body: unknown, current: C | null): I;
  /** The representation after a PatchOp body's operations, which `input` then reads. */
  patched(current: C, body: unknown): unknown;
}

/**
 * The routes of a resource type (RFC 7644 §3): list with filter and pages, create, and read, replace, patch and
 * delete one; `attributes`/`excludedAttributes` shape every answer, `If-Match` guards every write.
 */
export function resourceRouter<T, C, I, F extends string>(type: ResourceType<T, C, I, F>): express.Router {
  const router = express.Router();
  const answer = (req: express.Request, res: express.Response, status: 200 | 201, resource: T) => {
    const shown = type.show(resource);
    sendResource(req, res, status, shown, projectionOf(req, type.schema).apply(shown));
  };
  const members = (req: express.Request) => projectionOf(req, type.schema).wants('members');

  router.get('/', async (req, res) => {
    const filter = queryValue(req, 'filter');
    const query = filter === undefined ? null : filterQuery(filter, type.filterable, type.schema);
    const page = await type.list(query, { ...pageParams(req), members: members(req) });
    const projection = projectionOf(req, type.schema);
    sendList(
      res,
      page,
      page.items.map((item) => projection.apply(type.show(item))),
    );
  });
  router.post('/', async (req, res) => answer(req, res, 201, await type.create(type.input(req.body, null))));
  router.get('/:id', async (req, res) =>
    answer(req, res, 200, await type.get(req.params.id!, { members: members(req) })),
  );
  router.put('/:id', async (req, res) => {
    const change = (current: C) => type.input(req.body, current);
    answer(req, res, 200, await type.modify(req.params.id!, change, preconditionOf(req)));
  });
  router.patch('/:id', async (req, res) => {
    const change = (current: C) => type.input(type.patched(current, req.body), current);
    answer(req, res, 200, await type.modify(req.params.id!, change, preconditionOf(req)));
  });
  router.delete('/:id', async (req, res) => {
    await type.remove(req.params.id!, preconditionOf(req));
    res.status(204).end();
  });
  return router;
}
