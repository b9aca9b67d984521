import { ScimError } from '../problems/index.js';
import { GROUP_ATTRIBUTES, URN, USER_ATTRIBUTES, type Attribute } from './schemas.js';

/** RFC 7643 §3.1: every resource may carry the directory's own identifier for it. */
const EXTERNAL_ID: Attribute = {
  name: 'externalId',
  type: 'string',
  multiValued: false,
  description: "The directory's identifier for the resource.",
  required: false,
  caseExact: true,
  mutability: 'readWrite',
  returned: 'default',
  uniqueness: 'none',
};

/** What a resource type's bodies and PATCH paths may name, by the rules of its schema. */
export interface ResourceDefinition {
  readonly name: 'User' | 'Group';
  readonly schema: string;
  /** What a client may write: the schema's attributes and externalId. */
  readonly attributes: readonly Attribute[];
  /**
   * Attributes of the standard schemas (RFC 7643 §4) that this service provider does not keep, in lower case:
   * accepted and ignored, as RFC 7644 §3.3 allows, so that a directory's default attribute mappings work. Anything
   * else unknown is refused.
   */
  readonly ignored: ReadonlySet<string>;
  /** Schema URNs a body may list besides the core one. */
  readonly extensions: ReadonlySet<string>;
}

/** Attributes only the service provider writes: `id` must match if sent, the others are ignored. */
export const READ_ONLY = new Set(['id', 'meta', 'groups']);

const USER_IGNORED = [
  'nickName',
  'profileUrl',
  'title',
  'userType',
  'preferredLanguage',
  'locale',
  'timezone',
  'password',
  'phoneNumbers',
  'ims',
  'photos',
  'addresses',
  'entitlements',
  'roles',
  'x509Certificates',
  URN.enterpriseUser,
];

export const USER: ResourceDefinition = {
  name: 'User',
  schema: URN.user,
  attributes: [...USER_ATTRIBUTES, EXTERNAL_ID],
  ignored: new Set(USER_IGNORED.map((n) => n.toLowerCase())),
  extensions: new Set([URN.enterpriseUser.toLowerCase()]),
};

export const GROUP: ResourceDefinition = {
  name: 'Group',
  schema: URN.group,
  attributes: [...GROUP_ATTRIBUTES, EXTERNAL_ID],
  ignored: new Set(),
  extensions: new Set(),
};

const invalid = (message: string) => new ScimError('invalidValue', message);
/** Names from a request are quoted in errors shortened and printable. */
export const shown = (name: string) => JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);

export const find = (attributes: readonly Attribute[], name: string) => {
  const lower = name.toLowerCase();
  return attributes.find((a) => a.name.toLowerCase() === lower);
};

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Entra sends booleans as strings ("True", "False"): accepted in any case. */
function bool(value: unknown, where: string): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
  throw invalid(`${where} must be true or false.`);
}

/** One value of an attribute, checked against its type; complex values with their sub-attributes' names made canonical. */
function single(attribute: Attribute, value: unknown, where: string): unknown {
  switch (attribute.type) {
    case 'boolean':
      return bool(value, where);
    case 'complex': {
      if (!isObject(value)) throw invalid(`${where} must be an object.`);
      const out: Record<string, unknown> = {};
      for (const [key, sub] of Object.entries(value)) {
        const subAttribute = find(attribute.subAttributes ?? [], key);
        if (!subAttribute) throw invalid(`${where} has no sub-attribute ${shown(key)}.`);
        if (subAttribute.name in out) throw invalid(`${where}.${subAttribute.name} is given twice.`);
        if (sub !== null) out[subAttribute.name] = single(subAttribute, sub, `${where}.${subAttribute.name}`);
      }
      return out;
    }
    default:
      if (typeof value !== 'string') throw invalid(`${where} must be a string.`);
      // PostgreSQL text cannot hold U+0000.
      if (value.includes('\u0000')) throw invalid(`${where} contains a NUL character.`);
      return value;
  }
}

/**
 * A value for an attribute, as a client sent it, made canonical: sub-attribute names in the schema's case, types
 * checked, booleans sent as strings read. A multi-valued attribute takes a list, or (`item`) one of its values.
 */
export function valueFor(attribute: Attribute, value: unknown, where: string, opts: { item?: boolean } = {}): unknown {
  if (value === null) return null;
  if (!attribute.multiValued || opts.item) return single(attribute, value, where);
  if (!Array.isArray(value)) throw invalid(`${where} must be a list.`);
  return value.map((v, i) => single(attribute, v, `${where}[${i}]`));
}

/** A resource body's attributes (POST, PUT, a PATCH's pathless value), by canonical name. */
export interface ResourceValues {
  readonly values: Record<string, unknown>;
  /** The `id` the body carried, if any: it must name the resource it is sent to. */
  readonly id?: unknown;
  readonly schemas?: unknown;
}

/** Reads a body's top-level attributes: unknown ones refused, the standard ones not kept here dropped. */
export function resourceValues(definition: ResourceDefinition, body: Record<string, unknown>): ResourceValues {
  const values: Record<string, unknown> = {};
  let id: unknown;
  let schemas: unknown;
  const seen = new Set<string>();
  for (const [key, value] of Object.entries(body)) {
    const lower = key.toLowerCase();
    if (seen.has(lower)) throw invalid(`${shown(key)} is given twice.`);
    seen.add(lower);
    if (lower === 'schemas') schemas = value;
    else if (lower === 'id') id = value;
    else if (READ_ONLY.has(lower) || definition.ignored.has(lower)) continue;
    else {
      const attribute = find(definition.attributes, key);
      if (!attribute) throw invalid(`A ${definition.name} has no attribute ${shown(key)}.`);
      values[attribute.name] = valueFor(attribute, value, attribute.name);
    }
  }
  return { values, ...(id !== undefined ? { id } : {}), ...(schemas !== undefined ? { schemas } : {}) };
}

/** `schemas` must list the resource's core schema, and nothing this service provider does not know. */
export function checkSchemas(definition: ResourceDefinition, schemas: unknown): void {
  if (!Array.isArray(schemas) || !schemas.every((s): s is string => typeof s === 'string')) {
    throw new ScimError('invalidSyntax', `schemas must be a list that includes ${definition.schema}.`);
  }
  const lower = schemas.map((s) => s.toLowerCase());
  if (!lower.includes(definition.schema.toLowerCase())) {
    throw new ScimError('invalidSyntax', `schemas must include ${definition.schema}.`);
  }
  const other = schemas.find(
    (s, i) => lower[i] !== definition.schema.toLowerCase() && !definition.extensions.has(lower[i]!),
  );
  if (other !== undefined) throw invalid(`Schema ${shown(other)} is not supported for a ${definition.name}.`);
}

/**
 * The attributes of a POST or PUT body, or of a patched representation: an object, with the resource's core schema
 * in `schemas`, and an `id` (if any) that is the one of `current`, the resource it replaces.
 */
export function bodyValues(
  definition: ResourceDefinition,
  body: unknown,
  current: { readonly id: string } | null,
): Record<string, unknown> {
  if (!isObject(body)) {
    throw new ScimError('invalidSyntax', `The body must be a ${definition.name} resource (a JSON object).`);
  }
  const { values, id, schemas } = resourceValues(definition, body);
  checkSchemas(definition, schemas);
  if (current && id !== undefined && id !== current.id) throw new ScimError('mutability', 'id cannot be changed.');
  return values;
}
