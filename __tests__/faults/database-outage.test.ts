import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { loginWithPkce } from '../../src/auth/pkceLogin.js';
import { startPostgres, type PostgresCluster } from '../helpers/infra.js';
import { eventually, startLoad, type Send } from '../helpers/load.js';
import { startReplica, type Replica } from '../helpers/replica.js';

const OUTAGE_MS = 10_000;
const QUERY = '{ recentOrders(first: 5) { id status customer { name } } }';

describe('PostgreSQL stopped under load', () => {
  let pg: PostgresCluster;
  let replica: Replica;
  let auth: string;
  let orderId: string;
  beforeAll(async () => {
    pg = await startPostgres();
    replica = await startReplica({ DATABASE_URL: pg.url });
    const { accessToken } = await loginWithPkce({ issuer: `${replica.url}/idp`, username: 'alice', password: 'alice' });
    auth = `Bearer ${accessToken}`;
    const res = await request(replica.url)
      .post('/v1/orders')
      .set('authorization', auth)
      .set('idempotency-key', randomUUID())
      .send({ items: [{ sku: 'DL-009', qty: 1 }] })
      .expect(201);
    orderId = (res.body as { id: string }).id;
  });
  afterAll(async () => {
    await replica?.stop('SIGKILL');
    await pg?.destroy();
  });

  const send: Send = async (n) => {
    if (n % 2 === 0) {
      const res = await request(replica.url)
        .get(`/v1/orders/${orderId}`)
        .set('authorization', auth)
        .ok(() => true);
      return {
        name: 'rest',
        status: res.status,
        retryAfter: res.headers['retry-after'],
        contentType: res.headers['content-type'],
        body: res.body,
      };
    }
    const res = await request(replica.url)
      .post('/graphql')
      .set('authorization', auth)
      .send({ query: QUERY })
      .ok(() => true);
    return {
      name: 'graphql',
      status: res.status,
      retryAfter: res.headers['retry-after'],
      contentType: res.headers['content-type'],
      body: res.body,
    };
  };

  test('requests get 503 with Retry-After at once, /readyz says 503, and the app recovers without a restart', async () => {
    const pid = replica.child.pid;
    const load = startLoad({ rate: 20, maxRequests: 2_000, send });
    await eventually('the load to be answered', async () => load.outcomes.filter((o) => o.status === 200).length >= 10);

    await pg.stop();
    const down = Date.now();
    await request(replica.url).get('/readyz').expect(503);
    await request(replica.url)
      .get(`/v1/orders/${orderId}`)
      .set('authorization', auth)
      .expect(503)
      .expect('retry-after', '1')
      .expect('content-type', /^application\/problem\+json/)
      .expect((res) => assert.equal((res.body as { code: string }).code, 'SERVICE_UNAVAILABLE'));
    await request(replica.url)
      .post('/graphql')
      .set('authorization', auth)
      .send({ query: QUERY })
      .expect(503)
      .expect('retry-after', '1')
      .expect((res) => {
        const { errors } = res.body as { errors: { extensions: { code: string } }[] };
        assert.ok(errors.length > 0);
        for (const e of errors) assert.equal(e.extensions.code, 'SERVICE_UNAVAILABLE');
      });
    // The outage itself is the scenario: it lasts a fixed time, whatever the load does meanwhile.
    await new Promise((r) => setTimeout(r, OUTAGE_MS - (Date.now() - down)));
    const up = Date.now();
    await pg.start();

    await eventually('/readyz to answer 200 again', async () => (await request(replica.url).get('/readyz')).ok);
    const recovered = Date.now();
    await eventually('requests to succeed again', async () =>
      load.outcomes.some((o) => o.sentAt > recovered && o.status === 200) ? true : undefined,
    );
    const outcomes = await load.done();

    assert.equal(replica.child.pid, pid);
    assert.equal(replica.child.exitCode, null, 'the replica recovered without a restart');
    const unexpected = outcomes.filter((o) => o.status !== 200 && o.status !== 503);
    assert.deepEqual(unexpected, [], 'every request got 200 or 503, never a 500 or a broken connection');

    const during = outcomes.filter((o) => o.sentAt > down && o.sentAt + o.ms < up);
    assert.ok(during.length >= 20, `${during.length} requests were sent during the outage`);
    for (const o of during) {
      assert.equal(o.status, 503, `${o.name} during the outage`);
      assert.equal(o.retryAfter, '1');
      // Fail fast: well inside the 30 s request timeout a hung pool would hit (pg connects time out after 1 s).
      assert.ok(o.ms < 5_000, `${o.name} took ${o.ms} ms`);
      if (o.name === 'rest') {
        assert.match(o.contentType ?? '', /^application\/problem\+json/);
        assert.equal((o.body as { status: number }).status, 503);
      } else {
        const { errors } = o.body as { errors: { extensions: { code: string } }[] };
        assert.equal(errors[0]?.extensions.code, 'SERVICE_UNAVAILABLE');
      }
    }
    const afterwards = outcomes.filter((o) => o.sentAt > recovered);
    assert.ok(afterwards.length > 0);
    assert.ok(
      afterwards.every((o) => o.status === 200),
      'every request sent after /readyz recovered succeeded',
    );
  });
});
