import type { Request, Response } from 'express';
import { entityTag, type Precondition } from '../../domain/etags.js';
import { ifNoneMatchMatches, parseEtagList } from '../middleware/index.js';
import { ScimError, SCIM_MEDIA_TYPE } from '../problems/index.js';
import { shown } from './attributes.js';
import { URN } from './schemas.js';

type Versioned = {
  readonly id: string;
  readonly version: number;
  readonly createdAt: string;
  readonly updatedAt: string;
};

/** RFC 7643 §3.1 `meta`, with `version` the same strong entity tag as the ETag header. */
export function metaOf(resourceType: 'User' | 'Group', resource: Versioned, location: string) {
  return {
    resourceType,
    created: resource.createdAt,
    lastModified: resource.updatedAt,
    version: entityTag(resource),
    location,
  };
}

export function send(res: Response, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.status(status).set(headers).type(SCIM_MEDIA_TYPE).send(JSON.stringify(body));
}

/** A resource with its ETag (and, for a 201, its Location); a GET that names its current tag gets 304. */
export function sendResource(
  req: Request,
  res: Response,
  status: 200 | 201,
  resource: { readonly meta: { readonly version: string; readonly location: string } },
  body: unknown = resource,
): void {
  const etag = resource.meta.version;
  const ifNoneMatch = req.get('if-none-match');
  if (req.method === 'GET' && ifNoneMatch !== undefined) {
    const list = parseEtagList(ifNoneMatch);
    if (list && ifNoneMatchMatches(list, etag)) {
      res.status(304).set('ETag', etag).end();
      return;
    }
  }
  send(res, status, body, { ETag: etag, ...(status === 201 ? { Location: resource.meta.location } : {}) });
}

/** RFC 7644 §3.4.2 ListResponse. */
export function sendList(res: Response, page: { totalResults: number; startIndex: number }, resources: unknown[]) {
  send(res, 200, {
    schemas: [URN.listResponse],
    totalResults: page.totalResults,
    startIndex: page.startIndex,
    itemsPerPage: resources.length,
    Resources: resources,
  });
}

/** If-Match on PUT, PATCH and DELETE (RFC 7644 §3.14), as the domain's precondition. */
export function preconditionOf(req: Request): Precondition | undefined {
  const header = req.get('if-match');
  if (header === undefined) return undefined;
  const list = parseEtagList(header);
  if (!list) throw new ScimError('invalidSyntax', 'If-Match must be * or a list of entity tags.');
  return { ifMatch: list };
}

const INTEGER = /^[-+]?\d{1,9}$/;

/** `startIndex` and `count` of a list request: integers, or absent. */
export function pageParams(req: Request): { startIndex?: number; count?: number } {
  const read = (name: 'startIndex' | 'count') => {
    const value = queryValue(req, name);
    if (value === undefined) return undefined;
    if (!INTEGER.test(value)) throw new ScimError('invalidValue', `${name} must be an integer.`);
    return Number(value);
  };
  const startIndex = read('startIndex');
  const count = read('count');
  return { ...(startIndex !== undefined ? { startIndex } : {}), ...(count !== undefined ? { count } : {}) };
}

/** One query parameter, by its name in any case (SCIM clients differ); a repeated one is refused. */
export function queryValue(req: Request, name: string): string | undefined {
  const lower = name.toLowerCase();
  const query = req.query as Record<string, unknown>;
  const keys = Object.keys(query).filter((k) => k.toLowerCase() === lower);
  if (!keys.length) return undefined;
  const value = query[keys[0]!];
  if (keys.length > 1 || typeof value !== 'string') {
    throw new ScimError('invalidValue', `Send the ${shown(name)} parameter once, as text.`);
  }
  return value;
}

/** `attributes` / `excludedAttributes` (RFC 7644 §3.9): lists of attribute names, lower-cased, URN prefix dropped. */
function attributeList(value: string | undefined, schema: string): string[] | undefined {
  if (value === undefined) return undefined;
  return value
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean)
    .map((name) => (name.startsWith(`${schema.toLowerCase()}:`) ? name.slice(schema.length + 1) : name));
}

/**
 * What a response includes of each resource (RFC 7644 §3.9): `id` and `schemas` always, and either only the
 * attributes asked for or all but the excluded ones, top-level or `parent.sub`.
 */
export function projectionOf(req: Request, schema: string) {
  const only = attributeList(queryValue(req, 'attributes'), schema);
  const excluded = attributeList(queryValue(req, 'excludedAttributes'), schema) ?? [];
  const wants = (name: string) => {
    const lower = name.toLowerCase();
    if (lower === 'id' || lower === 'schemas') return true;
    if (only) return only.some((a) => a === lower || a.startsWith(`${lower}.`));
    return !excluded.includes(lower);
  };
  return {
    /** Whether the response shows this top-level attribute at all (to skip reading what nobody asked for). */
    wants,
    apply<T extends Record<string, unknown>>(resource: T): Partial<T> {
      const out: Record<string, unknown> = {};
      for (const [name, value] of Object.entries(resource)) {
        if (!wants(name)) continue;
        const lower = name.toLowerCase();
        const subs = only?.filter((a) => a.startsWith(`${lower}.`)).map((a) => a.slice(lower.length + 1));
        const isComplex = value !== null && typeof value === 'object' && !Array.isArray(value);
        if (only && subs?.length && !only.includes(lower) && isComplex) {
          out[name] = Object.fromEntries(Object.entries(value).filter(([k]) => subs.includes(k.toLowerCase())));
        } else {
          out[name] = value;
        }
      }
      return out as Partial<T>;
    },
  };
}

export type Projection = ReturnType<typeof projectionOf>;
