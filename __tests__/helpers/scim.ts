import assert from 'node:assert/strict';
import request from 'supertest';
import type { Response } from 'supertest';
import { http } from './http.js';

/** The shared secret test servers are given as SCIM_TOKEN. */
export const SCIM_TOKEN = 'scim-test-secret-0123456789abcdefghijklmnopqrstuvwxyz';
export const SCIM_JSON = 'application/scim+json; charset=utf-8';
export const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const GROUP_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Group';
export const PATCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
export const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';

export interface ScimErrorBody {
  schemas: string[];
  status: string;
  scimType?: string;
  detail: string;
}

/**
 * A directory talking to /scim/v2 of one server: Bearer credential (SCIM_TOKEN unless told), application/scim+json
 * bodies, and (with `ip`) an X-Forwarded-For address of its own, so that each test spends its own rate budget.
 */
export function directory(url: string, opts: { token?: string; ip?: string } = {}) {
  const agent = http(url);
  const headers = {
    authorization: `Bearer ${opts.token ?? SCIM_TOKEN}`,
    ...(opts.ip ? { 'x-forwarded-for': opts.ip } : {}),
  };
  const withBody = (method: 'post' | 'put' | 'patch', path: string, body: unknown, extra: Record<string, string>) =>
    agent[method](`/scim/v2${path}`)
      .set({ ...headers, 'content-type': 'application/scim+json', ...extra })
      .send(JSON.stringify(body));
  return {
    get: (path: string, extra: Record<string, string> = {}) =>
      agent.get(`/scim/v2${path}`).set({ ...headers, ...extra }),
    post: (path: string, body: unknown, extra: Record<string, string> = {}) => withBody('post', path, body, extra),
    put: (path: string, body: unknown, extra: Record<string, string> = {}) => withBody('put', path, body, extra),
    patch: (path: string, operations: unknown[], extra: Record<string, string> = {}) =>
      withBody('patch', path, { schemas: [PATCH_SCHEMA], Operations: operations }, extra),
    delete: (path: string, extra: Record<string, string> = {}) =>
      agent.delete(`/scim/v2${path}`).set({ ...headers, ...extra }),
  };
}

export type Directory = ReturnType<typeof directory>;

/** A minimal User body. */
export function userBody(userName: string, more: Record<string, unknown> = {}) {
  return { schemas: [USER_SCHEMA], userName, active: true, ...more };
}

/** Asserts a SCIM error answer: its status, the schema, `status` as a string, `scimType` when one applies. */
export function assertScimError(res: Response, status: number, scimType?: string): ScimErrorBody {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${res.text}`);
  assert.equal(res.headers['content-type'], SCIM_JSON);
  const body = res.body as ScimErrorBody;
  assert.deepEqual(body.schemas, [ERROR_SCHEMA]);
  assert.equal(body.status, String(status));
  assert.equal(body.scimType, scimType);
  assert.equal(typeof body.detail, 'string');
  assert.ok(body.detail.length > 0);
  return body;
}

/** An access token of the embedded IdP's `directory` client, by the client-credentials grant. */
export async function directoryAccessToken(issuer: string): Promise<string> {
  const res = await request(issuer)
    .post('/token')
    .auth('directory', 'directory-secret')
    .type('form')
    .send({ grant_type: 'client_credentials', scope: 'scim' })
    .expect(200);
  return (res.body as { access_token: string }).access_token;
}
