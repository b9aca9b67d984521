import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { importJWK, SignJWT, type JWK } from 'jose';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe("customers are created on their subject's first request", () => {
  let server: TestServer;
  let key: JWK;
  beforeAll(async () => {
    server = await startTestServer();
    const [row] = await server.running.app.db.query<{ jwks: { keys: JWK[] } }>('select jwks from idp_keys');
    key = row!.jwks.keys.find((k) => k.alg === 'RS256')!;
  });
  afterAll(() => server.close());

  /** A token for a subject the API has never seen, signed by the embedded issuer. */
  const tokenFor = async (sub: string) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({
      iss: server.running.app.issuer,
      aud: 'orders-api',
      sub,
      iat: now,
      exp: now + 300,
      scope: 'orders:read',
      name: 'New Person',
    })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid!, typ: 'at+jwt' })
      .sign(await importJWK(key, 'RS256'));
  };

  test("new subjects' concurrent first requests each get one and the same customer", async () => {
    const subjects = Array.from({ length: 15 }, () => `newcomer-${randomUUID()}`);
    const tokens = await Promise.all(subjects.map(tokenFor));
    const responses = await Promise.all(
      tokens.flatMap((token) =>
        Array.from({ length: 10 }, () => server.gql('{ viewer { customer { id name } } }', undefined, { token })),
      ),
    );
    for (const res of responses) assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
    for (let s = 0; s < subjects.length; s++) {
      const ids = new Set(
        responses
          .slice(s * 10, s * 10 + 10)
          .map((r) => (r.body.data as { viewer: { customer: { id: string } } }).viewer.customer.id),
      );
      assert.equal(ids.size, 1);
    }
    const [row] = await server.running.app.db.query<{ n: number }>(
      'select count(*)::int as n from customers where subject = any($1::text[])',
      [subjects],
    );
    assert.equal(row!.n, subjects.length);
  });
});
