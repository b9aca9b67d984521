import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { deviceAddress, openDevices, type Device } from '../helpers/devices.js';
import { freePort, startPostgres, startRedis, type PostgresCluster, type RedisServer } from '../helpers/infra.js';
import { eventually } from '../helpers/load.js';
import { behindBalancerEnv, startNginx, type Nginx } from '../helpers/nginx.js';
import { startReplica, type Replica } from '../helpers/replica.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The smaller case of issue 34's table (the bench runs 5,000 + 1,000): 800 WebSockets and 200 SSE streams. */
const WEBSOCKETS = 800;
const SSE_STREAMS = 200;
/** Devices per client address, as behind an office or carrier network. */
const PER_ADDRESS = 20;
/** deploy/nginx.conf's `limit_conn per_client`. */
const BALANCER_PER_CLIENT = 256;

/**
 * A thousand live devices behind the shipped balancer: two production replicas that trust only nginx
 * (TRUST_PROXY=127.0.0.1, where nginx connects from) behind Debian's nginx on deploy/nginx.conf, devices from
 * 127.1.0.0/16 source addresses. What a replica counts per client is the client nginx names, so neither its
 * per-address connection cap nor its WebSocket bound sees one client in the balancer.
 */
describe('live devices through the balancer (deploy/nginx.conf, two production replicas)', () => {
  let cluster: PostgresCluster;
  let redis: RedisServer;
  let issuer: TestServer;
  let nginx: Nginx;
  const replicas: Replica[] = [];
  let alice: string;
  let carol: string;

  beforeAll(async () => {
    [cluster, redis, issuer] = await Promise.all([startPostgres(), startRedis(), startTestServer()]);
    const [balancerPort, p1, p2] = await Promise.all([freePort(), freePort(), freePort()]);
    const env = {
      ...behindBalancerEnv({
        databaseUrl: cluster.url,
        redisUrl: redis.url,
        issuer: issuer.running.app.issuer,
        balancerPort,
        trustProxy: '127.0.0.1',
      }),
      RATE_LIMIT_POINTS: '1000000000',
      // One user holds every device here: the per-user bound is not what this measures.
      STREAMS_MAX_PER_USER: '100000',
    };
    // One after the other: the first applies the migrations and seeds.
    replicas.push(await startReplica(env, { port: p1 }));
    replicas.push(await startReplica(env, { port: p2 }));
    nginx = await startNginx({ port: balancerPort, upstreams: [p1, p2] });
    [alice, carol] = await Promise.all([issuer.token('alice'), issuer.token('carol')]);
  }, 120_000);

  afterAll(async () => {
    await nginx?.stop();
    await Promise.all(replicas.map((r) => r?.stop()));
    await issuer?.close();
    await redis?.stop();
    await cluster?.destroy();
  });

  test(`${WEBSOCKETS} WebSockets (${PER_ADDRESS} per client address) and ${SSE_STREAMS} SSE streams are all acknowledged; one order created through the balancer reaches every one; ordinary requests meanwhile get no error`, async () => {
    const opts = { url: nginx.url, token: carol, perAddress: PER_ADDRESS };
    const devices: Device[] = [
      ...(await openDevices('ws', WEBSOCKETS, opts)),
      ...(await openDevices('sse', SSE_STREAMS, { ...opts, firstAddress: WEBSOCKETS / PER_ADDRESS })),
    ];
    try {
      const refused = devices.filter((d) => d.refused).map((d) => `${d.kind} ${d.from}: ${d.refused}`);
      assert.deepEqual(refused, []);
      assert.equal(devices.filter((d) => d.acknowledgedAt).length, WEBSOCKETS + SSE_STREAMS);

      // 40 concurrent callers, 200 ordinary requests (REST reads and GraphQL queries) while the streams are open.
      const statuses: number[] = [];
      await Promise.all(
        Array.from({ length: 40 }, async (_, caller) => {
          for (let i = 0; i < 5; i++) {
            const res =
              (caller + i) % 2
                ? await request(nginx.url).get('/v1/orders?limit=5').set('authorization', `Bearer ${alice}`)
                : await request(nginx.url)
                    .post('/graphql')
                    .set('authorization', `Bearer ${alice}`)
                    .send({ query: '{ products { sku } }' });
            statuses.push(res.status);
          }
        }),
      );
      assert.deepEqual(
        statuses.filter((s) => s !== 200),
        [],
      );
      assert.equal(statuses.length, 200);

      const order = await request(nginx.url)
        .post('/v1/orders')
        .set('authorization', `Bearer ${alice}`)
        .set('idempotency-key', randomUUID())
        .send({ items: [{ sku: 'KB-001', qty: 1 }] })
        .expect(201);
      const id = order.body.id as string;
      const missing = await eventually(
        'every device to receive the order',
        async () => {
          const without = devices.filter((d) => !d.received.has(id));
          return without.length === 0 ? without : undefined;
        },
        { tries: 300, everyMs: 100 },
      ).catch(() => devices.filter((d) => !d.received.has(id)).map((d) => `${d.kind} ${d.from}`));
      assert.deepEqual(missing, []);
    } finally {
      for (const d of devices) d.close();
    }
  });

  /** A connection from `from` that sends a POST's headers and holds back its body: nginx counts it while it waits. */
  async function pending(from: string) {
    const socket: Socket = connect({ port: Number(new URL(nginx.url).port), host: '127.0.0.1', localAddress: from });
    const seen = { text: '' };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (seen.text += chunk));
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    socket.write('POST /v1/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n');
    return { socket, seen };
  }

  test(`the balancer's per-client limit: one address holds ${BALANCER_PER_CLIENT} connections in progress, of 300 at once the other 44 get 503 problem details with Retry-After; another address is served`, async () => {
    const from = deviceAddress(5000);
    const all = await Promise.all(Array.from({ length: 300 }, () => pending(from)));
    try {
      const answered = await eventually(
        'the connections past the limit to be answered',
        async () => {
          const done = all.filter((c) => c.seen.text.includes('\r\n\r\n{'));
          return done.length >= 300 - BALANCER_PER_CLIENT ? done : undefined;
        },
        { everyMs: 50 },
      );
      assert.equal(answered.length, 300 - BALANCER_PER_CLIENT);
      for (const { seen } of answered) {
        const [head = '', body = ''] = seen.text.split('\r\n\r\n');
        assert.match(head, /^HTTP\/1\.1 503 /);
        assert.match(head, /\r\nContent-Type: application\/problem\+json\r\n/i);
        assert.match(head, /\r\nRetry-After: 1\r\n/i);
        assert.equal((JSON.parse(body) as { code: string }).code, 'TOO_MANY_CONNECTIONS');
      }
      // The ones held were waiting for their bodies, not refused: each is answered by a replica once it is sent.
      const held = all.filter((c) => !answered.includes(c));
      for (const c of held) c.socket.write('{}');
      await eventually(
        'the held requests to be answered',
        async () => held.every((c) => c.seen.text.includes('\r\n\r\n')),
        {
          everyMs: 50,
        },
      );
      const statuses = new Set(held.map((c) => c.seen.text.split(' ')[1]));
      // A replica's answer (the request has no Idempotency-Key), not the balancer's refusal.
      assert.deepEqual(statuses, new Set(['400']));
      assert.equal(
        held.every((c) => c.seen.text.includes('"code":"IDEMPOTENCY_KEY_REQUIRED"')),
        true,
      );
      await request(nginx.url).get('/healthz').expect(200);
      const other = await pending(deviceAddress(5001));
      other.socket.write('{}');
      await eventually('an answer', async () => other.seen.text.includes('\r\n\r\n'), { everyMs: 20 });
      assert.match(other.seen.text, /^HTTP\/1\.1 400 /);
      other.socket.destroy();
    } finally {
      for (const c of all) c.socket.destroy();
    }
  });
});
