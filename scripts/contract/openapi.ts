import { createRequire } from 'node:module';
import type { Ajv as AjvClass } from 'ajv';
import openapiDiff from 'openapi-diff';

/**
 * openapi-diff compares each pair of request and response bodies with json-schema-diff, which first checks both
 * schemas against JSON Schema draft-07 with an Ajv instance made for that call: the draft-07 meta-schema is
 * compiled again every time, some 300 times a check, most of its CPU. Its check is replaced here by the same one
 * (the same Ajv and options, the same meta-schema, the same errors) on one instance that compiles it once. The
 * modules are those json-schema-diff itself loads; if it no longer has that function, this fails loudly.
 */
function compileDraft07Once(): void {
  const fromDiffer = createRequire(createRequire(import.meta.url).resolve('openapi-diff'));
  const fromSchemaDiff = createRequire(fromDiffer.resolve('json-schema-diff'));
  const validation = fromSchemaDiff('./json-schema-diff/diff-schemas/validate-schemas.js') as {
    validateSchemas: (source: unknown, destination: unknown) => Promise<void>;
  };
  if (typeof validation.validateSchemas !== 'function') {
    throw new Error('json-schema-diff no longer exports validateSchemas: see compileDraft07Once()');
  }
  const Ajv = (fromSchemaDiff('ajv') as { default: typeof AjvClass }).default;
  const ajv = new Ajv({ strict: false, meta: false });
  ajv.addMetaSchema(fromSchemaDiff('json-schema-spec-types/lib/json-schema-draft-07-schema') as object);
  const failure = (schema: unknown) =>
    ajv.validateSchema(schema as object) ? undefined : ajv.errorsText(ajv.errors || undefined);
  validation.validateSchemas = (source, destination) => {
    const sourceFailure = failure(source);
    if (sourceFailure !== undefined) {
      return Promise.reject(new Error(`Source schema is not a valid json schema: ${sourceFailure}`));
    }
    const destinationFailure = failure(destination);
    if (destinationFailure !== undefined) {
      return Promise.reject(new Error(`Destination schema is not a valid json schema: ${destinationFailure}`));
    }
    return Promise.resolve();
  };
}
compileDraft07Once();

type Difference = Pick<
  openapiDiff.DiffResult<openapiDiff.DiffResultType>,
  'code' | 'sourceSpecEntityDetails' | 'destinationSpecEntityDetails'
>;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface ContractChange {
  readonly level: 'breaking' | 'dangerous' | 'safe';
  readonly message: string;
}

/**
 * openapi-diff (Atlassian's differ) reads OpenAPI 3.0 only, so both documents are compared in their 3.0
 * spelling: the 3.1 idioms this project uses (`type: [T, 'null']`, `const`) have exact 3.0 equivalents.
 * References are inlined so that a response schema can be read as clients must read it: open to members
 * added later (`additionalProperties: false` holds for what the server accepts, not for what it sends).
 */
export function asOpenApi30(document: Json): Json {
  const resolve = (ref: string): Json => {
    let node: Json | undefined = document;
    for (const key of ref.replace(/^#\//, '').split('/')) {
      node =
        node && typeof node === 'object' && !Array.isArray(node)
          ? node[key.replace(/~1/g, '/').replace(/~0/g, '~')]
          : undefined;
    }
    if (node === undefined) throw new Error(`unresolved reference ${ref}`);
    return node;
  };
  const walk = (node: Json, inResponse: boolean, depth = 0): Json => {
    if (depth > 64) throw new Error('reference cycle in the OpenAPI document');
    if (Array.isArray(node)) return node.map((n) => walk(n, inResponse, depth + 1));
    if (node === null || typeof node !== 'object') return node;
    if (typeof node.$ref === 'string') return walk(resolve(node.$ref), inResponse, depth + 1);
    const out: { [key: string]: Json } = {};
    for (const [key, value] of Object.entries(node)) {
      if (key === 'type' && Array.isArray(value) && value.includes('null')) {
        const rest = value.filter((t) => t !== 'null');
        out.type = rest.length === 1 ? rest[0]! : rest;
        out.nullable = true;
      } else if (key === 'const') {
        out.enum = [value];
      } else if (key === 'examples' && Array.isArray(value)) {
        if (value.length) out.example = walk(value[0]!, inResponse, depth + 1);
      } else if (key === 'additionalProperties' && value === false && inResponse) {
        continue;
      } else if (key !== '$schema' && key !== 'jsonSchemaDialect' && key !== 'webhooks' && key !== 'components') {
        out[key] = walk(value, inResponse || key === 'responses', depth + 1);
      }
    }
    return out;
  };
  return withJsonRequestBodies({ ...(walk(document, false) as { [key: string]: Json }), openapi: '3.0.3' });
}

type JsonObject = { [key: string]: Json };
const isObject = (node: Json | undefined): node is JsonObject =>
  !!node && typeof node === 'object' && !Array.isArray(node);

/**
 * openapi-diff compares a request body only under `application/json`. A body that only has another JSON media
 * type (`application/merge-patch+json`) would go unchecked, and the arrival of `application/json` beside it would
 * look like a narrowing from "anything"; so such a body is compared under `application/json` too.
 */
function withJsonRequestBodies(document: JsonObject): JsonObject {
  for (const item of Object.values(isObject(document.paths) ? document.paths : {})) {
    for (const operation of Object.values(isObject(item) ? item : {})) {
      const body = isObject(operation) ? operation.requestBody : undefined;
      const content = isObject(body) ? body.content : undefined;
      if (!isObject(content) || content['application/json']) continue;
      const jsonType = Object.keys(content).find((type) => /^application\/[\w.-]+\+json$/.test(type));
      if (jsonType) content['application/json'] = content[jsonType]!;
    }
  }
  return document;
}

/** Names of members marked `deprecated: true` anywhere in a document's schemas. */
function deprecatedMembers(document: Json, found = new Set<string>()): Set<string> {
  if (Array.isArray(document)) for (const item of document) deprecatedMembers(item, found);
  else if (document && typeof document === 'object') {
    const properties = document.properties;
    if (properties && typeof properties === 'object' && !Array.isArray(properties)) {
      for (const [name, schema] of Object.entries(properties)) {
        if (schema && typeof schema === 'object' && !Array.isArray(schema) && schema.deprecated === true)
          found.add(name);
      }
    }
    for (const value of Object.values(document)) deprecatedMembers(value, found);
  }
  return found;
}

function membersOf(document: Json, found = new Set<string>()): Set<string> {
  if (Array.isArray(document)) for (const item of document) membersOf(item, found);
  else if (document && typeof document === 'object') {
    const properties = document.properties;
    if (properties && typeof properties === 'object' && !Array.isArray(properties))
      for (const name of Object.keys(properties)) found.add(name);
    for (const value of Object.values(document)) membersOf(value, found);
  }
  return found;
}

/**
 * Breaking changes fail. A response body change that only drops members the released document had marked
 * `deprecated: true` is dangerous instead, as a deprecated removal is in GraphQL.
 */
export async function openapiChanges(released: Json, current: Json): Promise<ContractChange[]> {
  const result = await openapiDiff.diffSpecs({
    sourceSpec: {
      content: JSON.stringify(asOpenApi30(released)),
      location: 'openapi.released.json',
      format: 'openapi3',
    },
    destinationSpec: { content: JSON.stringify(asOpenApi30(current)), location: 'current', format: 'openapi3' },
  });
  const removed = [...membersOf(released)].filter((m) => !membersOf(current).has(m));
  const deprecated = deprecatedMembers(released);
  const onlyDeprecatedRemoved = removed.length > 0 && removed.every((m) => deprecated.has(m));
  const describe = (d: Difference) => {
    const where = new Set([...d.sourceSpecEntityDetails, ...d.destinationSpecEntityDetails].map((e) => e.location));
    const what = removed.length ? ` (members removed: ${removed.join(', ')})` : '';
    return `${d.code} at ${[...where].join(', ')}${d.code.startsWith('response.body') ? what : ''}`;
  };
  const changes: ContractChange[] = [];
  for (const d of result.breakingDifferencesFound ? result.breakingDifferences : []) {
    const tolerated = onlyDeprecatedRemoved && d.code === 'response.body.scope.add';
    changes.push({ level: tolerated ? 'dangerous' : 'breaking', message: describe(d) });
  }
  for (const d of result.unclassifiedDifferences) changes.push({ level: 'dangerous', message: describe(d) });
  for (const d of result.nonBreakingDifferences) changes.push({ level: 'safe', message: describe(d) });
  return changes;
}
