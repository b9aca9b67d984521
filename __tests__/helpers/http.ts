import request from 'supertest';
import type { Response as SuperResponse, Test } from 'supertest';

/** An RFC 9457 problem details body as this API sends it. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: string;
  errors?: { pointer: string; reason: string }[];
}

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';

/**
 * A supertest request against a running server, by its URL (`request(baseUrl)`), redirects not followed:
 * `http(server.url).get('/healthz')`. Every HTTP-level assertion in the suite goes through supertest.
 */
export function http(baseUrl: string) {
  const agent = request(baseUrl);
  const build = (method: Method, path: string): Test => {
    const verb = method === 'DELETE' ? 'delete' : (method.toLowerCase() as Lowercase<Exclude<Method, 'DELETE'>>);
    return agent[verb](path).redirects(0);
  };
  return {
    get: (path: string) => build('GET', path),
    head: (path: string) => build('HEAD', path),
    post: (path: string) => build('POST', path),
    put: (path: string) => build('PUT', path),
    patch: (path: string) => build('PATCH', path),
    delete: (path: string) => build('DELETE', path),
    options: (path: string) => build('OPTIONS', path),
    method: build,
  };
}

/** A supertest response's headers as a WHATWG Headers, for helpers that keep fetch's shape (getSetCookie, get). */
export function headersOf(res: SuperResponse): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers as Record<string, string | string[] | undefined>)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  // Jest runs tests in a vm context, and node:assert's deepStrictEqual tells an array made by Node's own Headers
  // from one made in the test: getSetCookie() answers with an array of the test's realm.
  const native = headers.getSetCookie.bind(headers);
  Object.defineProperty(headers, 'getSetCookie', { value: () => [...native()] });
  return headers;
}

/** The body as sent, whatever its media type (supertest parses JSON into `body` but keeps `text` too). */
export function textOf(res: SuperResponse): string {
  if (typeof res.text === 'string') return res.text;
  return Buffer.isBuffer(res.body) ? res.body.toString('utf8') : '';
}

/** A supertest response as a fetch Response (status, headers, text()/json(), url), for fetch-shaped helpers. */
export function asFetchResponse(res: SuperResponse, url: string, method: string): Response {
  const noBody = method === 'HEAD' || res.status === 204 || res.status === 304;
  const text = noBody ? '' : textOf(res);
  const response = new Response(noBody ? null : text, { status: res.status, headers: headersOf(res) });
  // json() parses in the test's realm (see headersOf); headers keep the realm-safe getSetCookie.
  Object.defineProperties(response, {
    url: { value: url },
    headers: { value: headersOf(res) },
    json: { value: async () => JSON.parse(text) as unknown },
  });
  return response;
}

/**
 * fetch's signature over supertest, for fetch-shaped helpers and tests that read a Response (status,
 * headers.get/getSetCookie, text(), json()). Like fetch, it follows redirects unless `redirect: 'manual'`.
 */
export async function send(
  url: string | URL,
  init: {
    method?: string;
    headers?: Record<string, string>;
    body?: string | URLSearchParams;
    redirect?: 'manual' | 'follow';
  } = {},
): Promise<Response> {
  let target = new URL(url);
  let method = (init.method ?? 'GET').toUpperCase() as Method;
  let body = init.body;
  for (let hops = 0; ; hops++) {
    let req = http(target.origin)
      .method(method, `${target.pathname}${target.search}`)
      .set(init.headers ?? {});
    if (body !== undefined) {
      if (body instanceof URLSearchParams && !init.headers?.['content-type']) req = req.type('form');
      req = req.send(body.toString());
    }
    const res = asFetchResponse(await req, target.href, method);
    const location = res.headers.get('location');
    if (init.redirect === 'manual' || !location || ![301, 302, 303, 307, 308].includes(res.status)) return res;
    if (hops === 20) throw new Error(`send: too many redirects from ${String(url)}`);
    // As fetch does: 303 (and 301/302 after a POST) turn into a GET without a body.
    if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
      method = 'GET';
      body = undefined;
    }
    target = new URL(location, target);
  }
}
