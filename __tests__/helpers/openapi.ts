import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';
import * as addFormatsModule from 'ajv-formats';
import { openapiDocument } from '../../src/http/rest/openapi.js';
import { headersOf, http, textOf, type Method } from './http.js';

// ajv-formats is CommonJS; under ESM the plugin function arrives as the default export.
const addFormats = (addFormatsModule as unknown as { default: (ajv: Ajv2020) => void }).default;

type Doc = typeof openapiDocument;
interface HeaderSpec {
  required?: boolean;
  schema?: object;
}
interface ResponseSpec {
  headers?: Record<string, HeaderSpec | { $ref: string }>;
  content?: Record<string, unknown>;
}

const DOC_ID = 'https://orders.api/openapi.json';
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ ...(openapiDocument as object), $id: DOC_ID });

const escape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

function resolve<T>(node: T | { $ref: string }): T {
  if (node && typeof node === 'object' && '$ref' in node) {
    let value: unknown = openapiDocument;
    for (const part of node.$ref.replace(/^#\//, '').split('/')) value = (value as Record<string, unknown>)[part];
    return value as T;
  }
  return node as T;
}

/** The documented path template for a concrete request path under /v1. */
function templateFor(path: string): string | undefined {
  return Object.keys(openapiDocument.paths).find((tpl) =>
    new RegExp(`^${tpl.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path),
  );
}

const seen: string[] = [];

/** Every response a test receives goes through here: it must be one the document describes. */
export function assertDocumented(
  method: string,
  url: string,
  res: { status: number; headers: Headers },
  bodyText: string,
): void {
  const path = new URL(url).pathname.replace(/^\/v1/, '');
  const template = templateFor(path);
  assert.ok(template, `${path} is not in the OpenAPI document`);
  const operations = openapiDocument.paths[template as keyof Doc['paths']] as Record<string, unknown>;
  const operation = operations[method.toLowerCase()] as { responses: Record<string, ResponseSpec> } | undefined;
  const where = `${method} ${template} → ${res.status}`;
  if (!operation) {
    // An undocumented method must be refused, naming exactly the documented ones.
    const documented = Object.keys(operations)
      .filter((k) => k !== 'parameters')
      .map((k) => k.toUpperCase());
    // HEAD is served wherever GET is (RFC 9110 §9.3.2), documented or not.
    if (documented.includes('GET') && !documented.includes('HEAD')) documented.push('HEAD');
    assert.equal(res.status, method === 'OPTIONS' ? 204 : 405, where);
    assert.deepEqual(res.headers.get('allow')?.split(', ').sort(), documented.sort(), where);
    return;
  }
  const spec = operation.responses[String(res.status)];
  assert.ok(spec, `${where} is not documented`);
  seen.push(`${method} ${template} ${res.status}`);
  for (const [name, headerOrRef] of Object.entries(spec.headers ?? {})) {
    const header = resolve<HeaderSpec>(headerOrRef);
    const value = res.headers.get(name);
    if (header.required) assert.ok(value !== null, `${where}: header ${name} is required`);
    if (value !== null && header.schema) {
      const ok = ajv.validate(header.schema, value);
      assert.ok(ok, `${where}: header ${name}: ${value} ${ajv.errorsText()}`);
    }
  }
  if (!spec.content) {
    assert.equal(bodyText, '', `${where}: no body is documented`);
    return;
  }
  const mediaType = res.headers.get('content-type')?.split(';')[0]?.trim() ?? '';
  assert.ok(mediaType in spec.content, `${where}: content type ${mediaType} is not documented`);
  const pointer = [
    'paths',
    template,
    method.toLowerCase(),
    'responses',
    String(res.status),
    'content',
    mediaType,
    'schema',
  ]
    .map((p) => escape(p!))
    .join('/');
  const validate = ajv.getSchema(`${DOC_ID}#/${pointer}`);
  assert.ok(validate, `${where}: schema not found`);
  const body: unknown = JSON.parse(bodyText);
  assert.ok(validate(body), `${where}: ${ajv.errorsText(validate.errors)}\n${bodyText.slice(0, 500)}`);
}

/** Which documented responses the suite has exercised so far. */
export function documentedResponsesSeen(): readonly string[] {
  return seen;
}

export interface RestResponse {
  status: number;
  headers: Headers;
  text: string;
  json: <T = Record<string, unknown>>() => T;
}

/** supertest for /v1 that checks each response against the OpenAPI document. */
export async function rest(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<RestResponse> {
  const url = `${base}/v1${path}`;
  const headers: Record<string, string> = { ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}) };
  if (opts.body !== undefined || opts.raw !== undefined) {
    headers['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  }
  let req = http(base)
    .method(method as Method, `/v1${path}`)
    .set({ ...headers, ...opts.headers });
  if (opts.raw !== undefined) req = req.send(opts.raw);
  else if (opts.body !== undefined) req = req.send(JSON.stringify(opts.body));
  const res = await req;
  const text = method === 'HEAD' ? '' : textOf(res);
  const reply = { status: res.status, headers: headersOf(res) };
  assertDocumented(method, url, reply, text);
  return { ...reply, text, json: <T>() => JSON.parse(text) as T };
}
