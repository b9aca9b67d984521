import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import * as addFormatsModule from 'ajv-formats';
import { openapiDocument } from '../../src/http/rest/openapi.js';
import { headersOf, http, textOf, type Method } from './http.js';

// ajv-formats is CommonJS; under ESM the plugin function arrives as the default export.
const addFormats = (addFormatsModule as unknown as { default: (ajv: Ajv2020) => void }).default;

/**
 * Response headers an OpenAPI document does not describe, and why. Every other header an answer carries must be
 * declared for its status, or the answer fails the check.
 */
const NOT_THE_CONTRACTS = new Set([
  // Message framing and the connection (RFC 9112), set by Node for every answer of every server.
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'date',
  // Described by the response's `content` map instead (OpenAPI 3.1 §4.8.17.1: a Content-Type header is ignored),
  // and checked against it below.
  'content-type',
  // The origin's security headers, the same on every answer of the site (docs/operations.md#security-headers).
  'content-security-policy',
  'cross-origin-opener-policy',
  'cross-origin-resource-policy',
  'origin-agent-cluster',
  'referrer-policy',
  'strict-transport-security',
  'x-content-type-options',
  'x-dns-prefetch-control',
  'x-download-options',
  'x-frame-options',
  'x-permitted-cross-domain-policies',
  'x-xss-protection',
]);

type Json = Record<string, unknown>;
interface HeaderSpec {
  required?: boolean;
  schema?: object;
}
interface ResponseSpec {
  headers?: Record<string, HeaderSpec | { $ref: string }>;
  content?: Record<string, unknown>;
}

const escape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options', 'trace'];

export interface ResponseValidator {
  /** Asserts that an answer is one the document describes: its status, every header and its body. */
  check(method: string, url: string, res: { status: number; headers: Headers }, bodyText: string): void;
  /** Each documented response received so far, as `METHOD /template STATUS`. */
  seen(): ReadonlySet<string>;
  /** Each response the document describes, as `METHOD /template STATUS`. */
  documented(): readonly string[];
  /** Whether the document has the operation a method and URL name (its path and that method on it). */
  describes(method: string, url: string): boolean;
}

/**
 * A response validator for an OpenAPI 3.1 document: Ajv in the document's own JSON Schema dialect (2020-12), with the
 * whole document as one schema so that every `$ref` resolves as the document means it. What OpenAPI adds around the
 * schemas — which operation a URL and method name, which response a status picks, which headers it declares and
 * whether they are required, which media types its body may have — is read here. Nothing is specific to a resource:
 * any path the document adds is checked the same way.
 */
export function responseValidator(
  document: Json,
  opts: {
    /**
     * An older document, which later additions do not break: headers and statuses it does not declare are allowed
     * (the served document must declare them), and so is a Content-Type on a HEAD answer it gave no body.
     */
    additions?: boolean;
    /** Declared headers whose value changed since, `METHOD /template STATUS header` → why that is no break. */
    changed?: Readonly<Record<string, string>>;
  } = {},
): ResponseValidator {
  const id = `https://contract.test/${Math.random().toString(36).slice(2)}/openapi.json`;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ ...document, $id: id });
  const compiled = new Map<string, ValidateFunction>();
  const schemaAt = (pointer: string[]) => {
    const key = pointer.map(escape).join('/');
    let validate = compiled.get(key);
    if (!validate) {
      validate = ajv.getSchema(`${id}#/${key}`);
      assert.ok(validate, `no schema at #/${key}`);
      compiled.set(key, validate);
    }
    return validate;
  };
  const pointerOf = (ref: string) =>
    ref
      .replace(/^#\//, '')
      .split('/')
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  const at = (pointer: string[]) => pointer.reduce<unknown>((node, key) => (node as Json | undefined)?.[key], document);
  /** A node and where it really is: a `$ref` is followed to its target. */
  const follow = (pointer: string[]): { node: Json; pointer: string[] } => {
    const node = at(pointer) as Json;
    return typeof node?.$ref === 'string' ? follow(pointerOf(node.$ref)) : { node, pointer };
  };

  const paths = document.paths as Record<string, Json>;
  const basePath = new URL(
    ((document.servers as { url: string }[] | undefined)?.[0]?.url ?? '/').replace(/\/$/, ''),
    'http://x',
  ).pathname.replace(/\/$/, '');
  // A literal segment wins over a template (`/orders/export` before `/orders/{id}`).
  const templates = Object.keys(paths)
    .sort((a, b) => (a.match(/\{/g)?.length ?? 0) - (b.match(/\{/g)?.length ?? 0))
    .map((template) => ({ template, pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`) }));

  const seen = new Set<string>();
  const documented = Object.entries(paths).flatMap(([template, item]) =>
    METHODS.filter((m) => item[m]).flatMap((m) =>
      Object.keys((item[m] as { responses: Json }).responses).map(
        (status) => `${m.toUpperCase()} ${template} ${status}`,
      ),
    ),
  );

  const templateOf = (url: string) => {
    const pathname = new URL(url).pathname;
    const path = pathname.startsWith(`${basePath}/`) ? pathname.slice(basePath.length) : undefined;
    return path === undefined ? undefined : templates.find((t) => t.pattern.test(path))?.template;
  };

  function describes(method: string, url: string): boolean {
    const template = templateOf(url);
    return template !== undefined && Boolean(paths[template]![method.toLowerCase()]);
  }

  function check(method: string, url: string, res: { status: number; headers: Headers }, bodyText: string) {
    const pathname = new URL(url).pathname;
    assert.ok(pathname.startsWith(`${basePath}/`), `${pathname} is not under ${basePath}`);
    const path = pathname.slice(basePath.length);
    const template = templateOf(url);
    assert.ok(template, `${path} is not in the OpenAPI document`);
    const item = paths[template]!;
    const verb = method.toLowerCase();
    const where = `${method} ${template} → ${res.status}`;
    if (!item[verb]) {
      // An undocumented method is refused, naming exactly the documented ones; OPTIONS names them with 204.
      const allowed = METHODS.filter((m) => item[m]).map((m) => m.toUpperCase());
      // HEAD is served wherever GET is (RFC 9110 §9.3.2), documented or not.
      if (allowed.includes('GET') && !allowed.includes('HEAD')) allowed.push('HEAD');
      assert.equal(res.status, method === 'OPTIONS' ? 204 : 405, where);
      assert.deepEqual(res.headers.get('allow')?.split(', ').sort(), allowed.sort(), where);
      return;
    }
    const responses = (item[verb] as { responses: Record<string, unknown> }).responses;
    const status = [String(res.status), `${String(res.status)[0]}XX`, 'default'].find((s) => s in responses);
    if (!status && opts.additions) return;
    assert.ok(status, `${where} is not documented`);
    seen.add(`${method} ${template} ${status}`);
    const response = follow(['paths', template, verb, 'responses', status]);
    const spec = response.node as ResponseSpec;

    const declared = new Set<string>();
    for (const name of Object.keys(spec.headers ?? {})) {
      const header = follow([...response.pointer, 'headers', name]);
      declared.add(name.toLowerCase());
      const value = res.headers.get(name);
      if ((header.node as HeaderSpec).required) assert.ok(value !== null, `${where}: header ${name} is required`);
      if (
        value !== null &&
        (header.node as HeaderSpec).schema &&
        !opts.changed?.[`${method} ${template} ${status} ${name}`]
      ) {
        const validate = schemaAt([...header.pointer, 'schema']);
        assert.ok(validate(value), `${where}: header ${name}: ${value} ${ajv.errorsText(validate.errors)}`);
      }
    }
    const undeclared = [...res.headers.keys()].filter((name) => !declared.has(name) && !NOT_THE_CONTRACTS.has(name));
    if (!opts.additions) assert.deepEqual(undeclared, [], `${where}: headers the document does not declare`);

    const mediaType = res.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase();
    if (!spec.content) {
      if (!(opts.additions && method === 'HEAD'))
        assert.equal(mediaType, undefined, `${where}: no body is documented, but Content-Type is ${mediaType}`);
      assert.equal(bodyText, '', `${where}: no body is documented`);
      return;
    }
    assert.ok(mediaType && mediaType in spec.content, `${where}: content type ${mediaType} is not documented`);
    // RFC 9110 §9.3.2: HEAD answers as GET would, without the body.
    if (method === 'HEAD') {
      assert.equal(bodyText, '', `${where}: HEAD sent a body`);
      return;
    }
    const validate = schemaAt([...response.pointer, 'content', mediaType, 'schema']);
    const body: unknown = JSON.parse(bodyText);
    assert.ok(validate(body), `${where}: ${ajv.errorsText(validate.errors)}\n${bodyText.slice(0, 500)}`);
  }

  return { check, seen: () => seen, documented: () => documented, describes };
}

/** The validator over the document this code serves at /v1/openapi.json (the contract test checks they are equal). */
const served = responseValidator(JSON.parse(JSON.stringify(openapiDocument)) as Json);

/**
 * The validator over the released document (openapi.released.json): an operation that existed at release must still
 * answer as it was described then — a status it declared, each header it declared, a body its schema accepts — which
 * the code's own document alone cannot show (it agrees with the code by construction). Headers added since are not a
 * break, so they are allowed here (the served document must declare them).
 */
export const releasedContract = responseValidator(JSON.parse(readFileSync('openapi.released.json', 'utf8')) as Json, {
  additions: true,
  changed: {
    'GET /orders 200 Link':
      'rel="prev" was added beside rel="next" when lists became filtered connections (issue 35); a first page still sends rel="next" alone',
    'PATCH /orders/{id} 415 Accept-Patch':
      'application/json was accepted for PATCH after release; application/merge-patch+json, the released value, is still listed',
  },
});

/** Checks an answer against the released document too, when its operation existed at release. */
function checkReleased(...args: Parameters<ResponseValidator['check']>) {
  if (releasedContract.describes(args[0], args[1])) releasedContract.check(...args);
}

/**
 * Every response a test receives goes through here: it must be one the document describes, and one the released
 * document describes for an operation that existed at release.
 */
export const assertDocumented: ResponseValidator['check'] = (...args) => {
  served.check(...args);
  checkReleased(...args);
};

export interface RestResponse {
  status: number;
  headers: Headers;
  text: string;
  json: <T = Record<string, unknown>>() => T;
}

export interface RestOptions {
  token?: string;
  body?: unknown;
  raw?: string;
  headers?: Record<string, string>;
}

/**
 * supertest for /v1 that checks each response against the OpenAPI document (`validator`, or the code's own) and,
 * for an operation that existed at release, against the released one.
 */
export async function rest(
  base: string,
  method: string,
  path: string,
  opts: RestOptions = {},
  validator: ResponseValidator = served,
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
  validator.check(method, url, reply, text);
  checkReleased(method, url, reply, text);
  return { ...reply, text, json: <T>() => JSON.parse(text) as T };
}
