import { NoTarget, ScimError as PatchLibraryError, scimPatch, type ScimPatchOperation } from 'scim-patch';
import { filter as matcher, type Filter } from 'scim2-parse-filter';
import { ScimError } from '../problems/index.js';
import { find, isObject, READ_ONLY, resourceValues, shown, valueFor, type ResourceDefinition } from './attributes.js';
import { checkFilterShape, checkFilterText, parseFilterText } from './filters.js';
import {
  MAX_PATCH_FILTER_WORK,
  MAX_PATCH_OPERATIONS,
  MAX_PATCH_PATH_CHARACTERS,
  URN,
  type Attribute,
} from './schemas.js';

const OPS = new Set(['add', 'remove', 'replace']);
const PATH = /^([A-Za-z][\w$-]*)(?:\[(.+)\])?(?:\.([A-Za-z$][\w$-]*))?$/s;

type Op = 'add' | 'remove' | 'replace';

/** Where an operation points, made canonical; `drop` for a standard attribute this provider does not keep. */
type Target =
  | { readonly drop: true }
  | {
      readonly drop?: false;
      readonly path: string;
      readonly attribute: Attribute;
      readonly filtered: boolean;
      /** The value filter, parsed, and its comparisons: a replace or remove must find a value it matches. */
      readonly filter?: Filter;
      readonly comparisons?: number;
      readonly sub?: Attribute;
    };

/** An operation as scim-patch takes it, with the value filter of its path when it has one. */
interface Checked {
  readonly operation: ScimPatchOperation;
  readonly filtered?: {
    readonly attribute: string;
    readonly filter: Filter;
    readonly comparisons: number;
    /** A replace or remove must find a value the filter matches. */
    readonly mustMatch: boolean;
    /** A remove of the values whose `value` is this (Okta's `members[value eq "usr_…"]`): a plain scan. */
    readonly removesValue?: string;
  };
}

const syntax = (message: string) => new ScimError('invalidSyntax', message);

/** Every attribute a value filter names must be a sub-attribute of the multi-valued attribute it filters. */
function checkValueFilter(node: Filter, attribute: Attribute, path: string): void {
  switch (node.op) {
    case 'and':
    case 'or':
      return node.filters.forEach((f) => checkValueFilter(f, attribute, path));
    case 'not':
      return checkValueFilter(node.filter, attribute, path);
    case '[]':
      throw new ScimError('invalidPath', `${shown(path)}: value filters do not nest.`);
    default:
      if (!find(attribute.subAttributes ?? [], node.attrPath)) {
        throw new ScimError(
          'invalidPath',
          `${shown(path)}: ${attribute.name} has no sub-attribute ${shown(node.attrPath)}.`,
        );
      }
  }
}

/** A PATCH path (RFC 7644 §3.5.2): `attr`, `attr.sub`, `attr[filter]` or `attr[filter].sub`, with an optional URN. */
function targetOf(definition: ResourceDefinition, raw: string): Target {
  checkFilterText(raw, 'path', 'invalidPath');
  let path = raw;
  const core = `${definition.schema.toLowerCase()}:`;
  if (path.toLowerCase().startsWith(core)) path = path.slice(core.length);
  else if (/^urn:/i.test(path)) {
    const known = [...definition.extensions].find((urn) => path.toLowerCase().startsWith(`${urn}:`));
    if (known) return { drop: true };
    throw new ScimError('invalidPath', `${shown(raw)} names a schema this service provider does not know.`);
  }
  const match = PATH.exec(path);
  if (!match) throw new ScimError('invalidPath', `${shown(raw)} is not an attribute path.`);
  const [, name, filter, subName] = match as unknown as [string, string, string | undefined, string | undefined];
  const attribute = find(definition.attributes, name);
  if (!attribute) {
    const lower = name.toLowerCase();
    if (READ_ONLY.has(lower) || lower === 'schemas') {
      throw new ScimError('mutability', `${shown(name)} is read-only.`);
    }
    if (definition.ignored.has(lower)) return { drop: true };
    throw new ScimError('invalidPath', `A ${definition.name} has no attribute ${shown(name)}.`);
  }
  let parsed: Filter | undefined;
  let comparisons = 0;
  if (filter !== undefined) {
    if (!attribute.multiValued || attribute.type !== 'complex') {
      throw new ScimError('invalidPath', `${shown(raw)}: only multi-valued attributes take a value filter.`);
    }
    try {
      parsed = parseFilterText(filter, 'path filter');
    } catch (error) {
      throw new ScimError('invalidPath', (error as Error).message);
    }
    // The limits of a list's filter hold here too.
    comparisons = checkFilterShape(parsed, 'path filter', 'invalidPath');
    checkValueFilter(parsed, attribute, raw);
  }
  let sub: Attribute | undefined;
  if (subName !== undefined) {
    sub = find(attribute.subAttributes ?? [], subName);
    if (!sub) throw new ScimError('invalidPath', `${attribute.name} has no sub-attribute ${shown(subName)}.`);
    if (attribute.multiValued && filter === undefined) {
      throw new ScimError(
        'invalidPath',
        `${shown(raw)}: pick the values with a filter, as in ${attribute.name}[…].${sub.name}.`,
      );
    }
  }
  return {
    path: `${attribute.name}${filter !== undefined ? `[${filter}]` : ''}${sub ? `.${sub.name}` : ''}`,
    attribute,
    filtered: filter !== undefined,
    ...(parsed ? { filter: parsed, comparisons } : {}),
    ...(sub ? { sub } : {}),
  };
}

/** A group's member is named by its id alone; a group member (nesting) is not supported. */
function memberOf(item: unknown): unknown {
  if (!isObject(item)) return item;
  if (typeof item.type === 'string' && item.type.toLowerCase() !== 'user') {
    throw new ScimError('invalidValue', 'Only users can be members of a group here.');
  }
  return { value: item.value };
}

/** The value of an operation at its target, made canonical (a multi-valued attribute always gets a list). */
function valueAt(definition: ResourceDefinition, target: Exclude<Target, { drop: true }>, value: unknown): unknown {
  const { attribute, sub } = target;
  if (sub) return valueFor(sub, value, target.path);
  if (!attribute.multiValued) return valueFor(attribute, value, target.path);
  const one = !Array.isArray(value) && value !== null;
  const canonical = valueFor(attribute, value, target.path, { item: one || target.filtered });
  if (target.filtered) return canonical;
  const list = one ? [canonical] : (canonical as unknown[] | null);
  return definition.name === 'Group' && attribute.name === 'members' && list ? list.map(memberOf) : list;
}

/** A pathless add or replace: a partial resource. `id` may be sent (Okta does) but must be the resource's own. */
function pathlessValue(definition: ResourceDefinition, value: unknown, id: string): Record<string, unknown> {
  if (!isObject(value))
    throw new ScimError('invalidValue', 'Without a path, the value must be an object of attributes.');
  // As with a path: what only the service provider writes cannot be set (RFC 7644 §3.5.2, mutability).
  const readOnly = Object.keys(value).find((k) => k.toLowerCase() !== 'id' && READ_ONLY.has(k.toLowerCase()));
  if (readOnly !== undefined) throw new ScimError('mutability', `${shown(readOnly)} is read-only.`);
  const read = resourceValues(definition, value);
  if (read.id !== undefined && read.id !== id) throw new ScimError('mutability', 'id cannot be changed.');
  const values = read.values;
  if (definition.name === 'Group' && Array.isArray(values.members)) values.members = values.members.map(memberOf);
  return values;
}

/** The value an `eq` filter on the `value` sub-attribute alone names. */
function exactValue(filter: Filter): { removesValue?: string } {
  return filter.op === 'eq' && filter.attrPath.toLowerCase() === 'value' && typeof filter.compValue === 'string'
    ? { removesValue: filter.compValue }
    : {};
}

/** One operation of the body, checked, its op in lower case (Entra capitalises), its path and value canonical. */
function operationOf(definition: ResourceDefinition, raw: unknown, n: number, id: string): Checked | null {
  if (!isObject(raw)) throw syntax(`Operation ${n} must be an object.`);
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) {
    const lower = key.toLowerCase();
    if (lower !== 'op' && lower !== 'path' && lower !== 'value')
      throw syntax(`Operation ${n} has an unknown member ${shown(key)}.`);
    fields[lower] = value;
  }
  const op = typeof fields.op === 'string' ? fields.op.toLowerCase() : undefined;
  if (!op || !OPS.has(op)) throw syntax(`Operation ${n}: op must be add, remove or replace.`);
  if (fields.path !== undefined && typeof fields.path !== 'string')
    throw new ScimError('invalidPath', `Operation ${n}: path must be a string.`);
  const path = fields.path as string | undefined;
  if (op === 'remove' && path === undefined) throw new ScimError('noTarget', `Operation ${n}: remove needs a path.`);
  if (op !== 'remove' && !('value' in fields))
    throw new ScimError('invalidValue', `Operation ${n}: ${op} needs a value.`);
  if (path === undefined) {
    const value = pathlessValue(definition, fields.value, id);
    return Object.keys(value).length ? { operation: { op: op as Exclude<Op, 'remove'>, value } } : null;
  }
  const target = targetOf(definition, path);
  if (target.drop) return null;
  // RFC 7644 §3.5.2.2 and §3.5.2.3: a replace or remove whose value filter matches nothing is noTarget.
  const filtered = target.filter
    ? {
        filtered: {
          attribute: target.attribute.name,
          filter: target.filter,
          comparisons: target.comparisons ?? 1,
          mustMatch: op !== 'add',
          ...(op === 'remove' && fields.value === undefined && !target.sub ? exactValue(target.filter) : {}),
        },
      }
    : {};
  if (op === 'remove') {
    return fields.value === undefined
      ? { operation: { op: 'remove', path: target.path }, ...filtered }
      : {
          operation: { op: 'remove', path: target.path, value: valueAt(definition, target, fields.value) },
          ...filtered,
        };
  }
  const operation = {
    op: op as Exclude<Op, 'remove'>,
    path: target.path,
    value: valueAt(definition, target, fields.value),
  };
  return { operation, ...filtered };
}

/**
 * `remove attr[value eq "x"]` as scim-patch does it (every value whose `value` is x; the attribute gone with the
 * last), by one string comparison a value instead of the filter's evaluation, so that Okta's batches of them on a
 * large group stay cheap without being held to MAX_PATCH_FILTER_WORK.
 */
function withoutValue(resource: Record<string, unknown>, attribute: string, value: string, n: number) {
  const values = resource[attribute];
  const kept = Array.isArray(values) ? values.filter((v) => !(isObject(v) && v.value === value)) : [];
  if (!Array.isArray(values) || kept.length === values.length) {
    throw new ScimError('noTarget', `Operation ${n}: no value matches the path filter.`);
  }
  const { [attribute]: _removed, ...rest } = resource;
  return kept.length ? { ...resource, [attribute]: kept } : rest;
}

/**
 * The most filter work the operations can make, counted before any of them runs (so that what is past the bound
 * costs nothing): each value filter's comparisons times the most values its attribute can hold by then, as the
 * operations before it may have added some.
 */
function filterWork(checked: readonly (Checked | null)[], resource: Record<string, unknown>): number {
  const sizes = new Map<string, number>();
  const sizeOf = (attribute: string) => {
    const values = resource[attribute];
    return sizes.get(attribute) ?? (Array.isArray(values) ? values.length : 0);
  };
  let work = 0;
  for (const one of checked) {
    if (one === null) continue;
    const { operation, filtered } = one;
    if (filtered) {
      if (filtered.removesValue !== undefined) continue;
      work += filtered.comparisons * Math.max(sizeOf(filtered.attribute), 1);
      // An add whose filter matches nothing adds its value.
      if (operation.op === 'add') sizes.set(filtered.attribute, sizeOf(filtered.attribute) + 1);
      continue;
    }
    if (operation.op === 'remove') continue;
    const values =
      'path' in operation && operation.path !== undefined ? { [operation.path]: operation.value } : operation.value;
    if (!isObject(values)) continue;
    for (const [attribute, value] of Object.entries(values)) {
      if (!Array.isArray(value)) continue;
      const before = sizeOf(attribute);
      sizes.set(attribute, operation.op === 'add' ? before + value.length : Math.max(before, value.length));
    }
  }
  return work;
}

/**
 * Applies a PatchOp body (RFC 7644 §3.5.2) to a resource's current representation with scim-patch, after checking
 * every operation against the resource's schema: attributes are looked up in any case and written in the schema's
 * (scim-patch is case-sensitive, and a name such as `__proto__` must never reach it), values are type-checked, and
 * operations on standard attributes not kept here are dropped. Returns the patched representation.
 */
export function applyPatch(
  definition: ResourceDefinition,
  resource: Record<string, unknown>,
  body: unknown,
): Record<string, unknown> {
  if (!isObject(body)) throw syntax('The body must be a PatchOp message.');
  const keys = Object.keys(body);
  const schemasKey = keys.find((k) => k.toLowerCase() === 'schemas');
  const schemas = schemasKey === undefined ? undefined : body[schemasKey];
  if (
    !Array.isArray(schemas) ||
    !schemas.some((s) => typeof s === 'string' && s.toLowerCase() === URN.patchOp.toLowerCase())
  ) {
    throw syntax(`schemas must be [${JSON.stringify(URN.patchOp)}].`);
  }
  const operationsKey = keys.find((k) => k.toLowerCase() === 'operations');
  const operations = operationsKey === undefined ? undefined : body[operationsKey];
  if (!Array.isArray(operations) || !operations.length)
    throw new ScimError('invalidValue', 'Operations must be a non-empty list.');
  if (operations.length > MAX_PATCH_OPERATIONS) {
    throw new ScimError(
      'tooLarge',
      `A PATCH carries at most ${MAX_PATCH_OPERATIONS} operations; this one has ${operations.length}.`,
    );
  }
  // Paths are parsed and their filters evaluated against the resource: their total length bounds that work.
  let pathCharacters = 0;
  for (const operation of operations) {
    const path = isObject(operation) ? Object.entries(operation).find(([k]) => k.toLowerCase() === 'path')?.[1] : null;
    if (typeof path === 'string') pathCharacters += path.length;
  }
  if (pathCharacters > MAX_PATCH_PATH_CHARACTERS) {
    throw new ScimError(
      'tooLarge',
      `The paths of a PATCH total at most ${MAX_PATCH_PATH_CHARACTERS} characters; these total ${pathCharacters}.`,
    );
  }
  const id = String(resource.id);
  const checked = operations.map((op, i) => operationOf(definition, op, i + 1, id));
  const work = filterWork(checked, resource);
  if (work > MAX_PATCH_FILTER_WORK) {
    throw new ScimError(
      'tooMany',
      `The value filters of a PATCH make at most ${MAX_PATCH_FILTER_WORK} comparisons (each filter's comparisons ` +
        `times the values it is matched against); these could make ${work}. Send fewer operations at once.`,
    );
  }
  let patched = resource;
  for (const [i, one] of checked.entries()) {
    if (one === null) continue;
    if (one.filtered?.removesValue !== undefined) {
      patched = withoutValue(patched, one.filtered.attribute, one.filtered.removesValue, i + 1);
      continue;
    }
    if (one.filtered?.mustMatch) {
      const values = patched[one.filtered.attribute];
      if (!Array.isArray(values) || !values.some(matcher(one.filtered.filter))) {
        throw new ScimError('noTarget', `Operation ${i + 1}: no value matches the path filter.`);
      }
    }
    try {
      patched = scimPatch(patched as never, [one.operation], { mutateDocument: true, treatMissingAsAdd: false });
    } catch (error) {
      if (error instanceof NoTarget) throw new ScimError('noTarget', 'No value matches the path filter.');
      if (error instanceof PatchLibraryError) throw new ScimError('invalidValue', error.message.slice(0, 200));
      throw error;
    }
  }
  return patched;
}
