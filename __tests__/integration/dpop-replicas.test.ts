import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import request from 'supertest';
import { dpopLogin, makeProof, type DpopSession } from '../helpers/dpop.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

// Redis when the environment has one (CI's second pass), and the database table always: REDIS_URL=''
// turns Redis off for one pair of replicas, so the table is exercised on PGlite and on PostgreSQL alike.
const STORES = process.env.REDIS_URL ? (['Redis', 'the database'] as const) : (['the database'] as const);

for (const store of STORES) {
  describe(`a DPoP proof is good for one request across replicas (used ids kept in ${store})`, () => {
    const env: Record<string, string> = store === 'Redis' ? {} : { REDIS_URL: '' };
    let a: TestServer;
    let b: TestServer;
    let session: DpopSession;
    let htu: string;
    beforeAll(async () => {
      a = await startTestServer(env);
      // Both behind one load balancer: one PUBLIC_URL, so a proof's htu is valid at either replica.
      b = await startTestServer(
        { ...env, OIDC_ISSUER: a.running.app.issuer, PUBLIC_URL: a.running.publicUrl },
        { sameDatabaseAs: a },
      );
      session = await dpopLogin(a.running.app.issuer, 'alice');
      htu = `${a.running.publicUrl}/v1/orders`;
    });
    afterAll(async () => {
      await b.close();
      await a.close();
    });

    const send = (server: TestServer, dpop: string) =>
      request(server.url).get('/v1/orders').set('authorization', `DPoP ${session.token}`).set('dpop', dpop);
    const proof = (jti?: string) =>
      makeProof(session.keyPair, { htm: 'GET', htu, token: session.token, ...(jti ? { jti } : {}) });

    test('a proof used on one replica is refused on the other', async () => {
      const dpop = await proof();
      await send(a, dpop).expect(200);
      const res = await send(b, dpop).expect(401);
      assert.match(res.headers['www-authenticate']!, /^DPoP error="invalid_dpop_proof".*already used/);
    });

    test('the other replica accepts a fresh proof for the same URL (control)', async () => {
      await send(b, await proof()).expect(200);
    });

    test('the same proof sent to both replicas at once is accepted exactly once', async () => {
      const dpop = await proof();
      const statuses = (await Promise.all([send(a, dpop), send(b, dpop)])).map((r) => r.status).sort();
      assert.deepEqual(statuses, [200, 401]);
    });

    if (store === 'the database') {
      const keyFor = async (jti: string) => {
        const jkt = await calculateJwkThumbprint(await exportJWK(session.keyPair.publicKey));
        return createHash('sha256').update(`${jkt}.${jti}`).digest('base64url');
      };

      test('an id whose record has expired can be used again', async () => {
        const jti = `expired-${Date.now()}`;
        await a.running.app.db.query(
          `insert into dpop_proof_jtis (key, expires_at) values ($1, now() - interval '1 minute')`,
          [await keyFor(jti)],
        );
        await send(a, await proof(jti)).expect(200);
        await send(b, await proof(jti)).expect(401);
      });

      test('expired records are deleted by the shared sweeper of expired rows', async () => {
        const expired = await keyFor(`swept-${Date.now()}`);
        await a.running.app.db.query(
          `insert into dpop_proof_jtis (key, expires_at) values ($1, now() - interval '1 minute')`,
          [expired],
        );
        assert.equal(await b.running.app.sweeper.runOnce(), true);
        const rows = await a.running.app.db.query('select key from dpop_proof_jtis where key = $1', [expired]);
        assert.equal(rows.length, 0);
        const live = await a.running.app.db.query(
          'select count(*)::int as n from dpop_proof_jtis where expires_at > now()',
        );
        assert.ok((live[0] as { n: number }).n > 0, 'records still in use are kept');
      });
    }
  });
}
