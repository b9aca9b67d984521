import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import request from 'supertest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { subscriber } from '../helpers/subscriber.js';
import { codeOf, send, TRANSPORTS } from '../helpers/transports.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const POINTS = 5;

describe('the GraphQL rate budget on every transport', () => {
  let server: TestServer;
  let users: { alice: string; bob: string; carol: string };
  beforeAll(async () => {
    server = await startTestServer({ RATE_LIMIT_POINTS: String(POINTS), RATE_LIMIT_WINDOW_S: '600' });
    users = await server.users();
  });
  afterAll(() => server.close());

  test('HTTP answers carry RateLimit-Policy and RateLimit, and 429 with Retry-After once the budget is spent', async () => {
    const auth = { authorization: `Bearer ${users.alice}` };
    for (let i = 1; i <= POINTS; i++) {
      const res = await request(server.url)
        .post('/graphql')
        .set(auth)
        .send({ query: '{ viewer { subject } }' })
        .expect(200);
      assert.equal(res.headers['ratelimit-policy'], `"orders";q=${POINTS};w=600`);
      assert.match(res.headers.ratelimit!, new RegExp(`^"orders";r=${POINTS - i};t=\\d+$`));
      assert.deepEqual(Object.keys(res.body.extensions.cost).sort(), [
        'complexity',
        'remaining',
        'requested',
        'resetSeconds',
      ]);
      assert.equal(res.body.extensions.cost.remaining, POINTS - i);
    }
    const refused = await request(server.url)
      .post('/graphql')
      .set(auth)
      .send({ query: '{ viewer { subject } }' })
      .expect(429);
    assert.equal(refused.body.errors[0].extensions.code, 'RATE_LIMITED');
    assert.ok(Number(refused.headers['retry-after']) > 0);
    assert.equal(refused.body.data, undefined);
  });

  test('each transport refuses with RATE_LIMITED once its caller has spent the budget', async () => {
    const callers = { post: users.bob, get: users.carol, ws: undefined, sse: undefined } as const;
    for (const transport of ['post', 'get', 'ws'] as const) {
      const token = callers[transport];
      for (let i = 0; i < POINTS; i++) {
        const ok = await send(server.url, transport, { query: '{ __typename }' }, token);
        assert.equal(ok.body.errors, undefined, `${transport} #${i}`);
      }
      const res = await send(server.url, transport, { query: '{ __typename }' }, token);
      assert.equal(codeOf(res), 'RATE_LIMITED', transport);
      if (transport !== 'ws') assert.equal(res.status, 429);
    }
    // Anonymous callers share their address's budget: the WebSocket caller above spent it for SSE too.
    const res = await send(server.url, 'sse', { query: '{ __typename }' });
    assert.equal(codeOf(res), 'RATE_LIMITED');
  });
});

describe('persisted queries (APQ) on every transport', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ APQ_MAX_BYTES: '300', APQ_MAX_ENTRIES: '2' });
  });
  afterAll(() => server.close());

  test('a response that shared caches may store carries no RateLimit fields', async () => {
    const res = await request(server.url).get('/graphql').query({ query: '{ products { sku } }' }).expect(200);
    assert.match(res.headers['cache-control']!, /public/);
    assert.equal(res.headers.ratelimit, undefined);
    assert.equal(res.headers['ratelimit-policy'], undefined);
  });

  for (const transport of TRANSPORTS) {
    test(`${transport}: a hash that does not match the text is PERSISTED_QUERY_HASH_MISMATCH`, async () => {
      const res = await send(server.url, transport, {
        query: '{ products { sku } }',
        extensions: { persistedQuery: { version: 1, sha256Hash: sha256('{ products { name } }') } },
      });
      assert.equal(codeOf(res), 'PERSISTED_QUERY_HASH_MISMATCH');
    });

    test(`${transport}: an unknown hash is PERSISTED_QUERY_NOT_FOUND`, async () => {
      const res = await send(server.url, transport, {
        query: '',
        extensions: { persistedQuery: { version: 1, sha256Hash: sha256(randomUUID()) } },
      });
      assert.equal(codeOf(res), 'PERSISTED_QUERY_NOT_FOUND');
    });
  }

  const register = async (query: string) => {
    const extensions = { persistedQuery: { version: 1, sha256Hash: sha256(query) } };
    const res = await request(server.url).post('/graphql').send({ query, extensions }).expect(200);
    assert.equal(res.body.errors, undefined);
    return extensions;
  };

  test('a registered document is found by hash on every transport', async () => {
    const extensions = await register(`{ products { sku } a: __typename }`);
    for (const transport of TRANSPORTS) {
      const res = await send(server.url, transport, { query: '', extensions });
      assert.equal(res.body.errors, undefined, transport);
      assert.ok((res.body.data!.products as unknown[]).length > 0);
    }
  });

  test('a document larger than APQ_MAX_BYTES runs but is not registered', async () => {
    const query = `{ products { sku } ${' '.repeat(300)} }`;
    const extensions = await register(query);
    const lookup = await send(server.url, 'post', { extensions });
    assert.equal(codeOf(lookup), 'PERSISTED_QUERY_NOT_FOUND');
  });

  test('at most APQ_MAX_ENTRIES documents are kept: the oldest goes first', async () => {
    const [first] = [await register(`{ products { sku } b: __typename }`)];
    await register(`{ products { sku } c: __typename }`);
    await register(`{ products { sku } d: __typename }`);
    // Apollo does not wait for its cache.set before answering, so with Redis the eviction the third registration
    // causes can land just after that response: each look again is a full round trip behind it (bounded, no sleep).
    let lookup = await send(server.url, 'post', { extensions: first });
    for (let again = 0; again < 20 && codeOf(lookup) !== 'PERSISTED_QUERY_NOT_FOUND'; again++) {
      lookup = await send(server.url, 'post', { extensions: first });
    }
    assert.equal(codeOf(lookup), 'PERSISTED_QUERY_NOT_FOUND');
  });
});

describe('a subscription spends the rate budget once, when it subscribes', () => {
  const BUDGET = 3;
  let server: TestServer;
  let users: { alice: string; bob: string; carol: string };
  beforeAll(async () => {
    server = await startTestServer({ RATE_LIMIT_POINTS: String(BUDGET), RATE_LIMIT_WINDOW_S: '600' });
    users = await server.users();
  });
  afterAll(() => server.close());

  test('a staff subscriber receives more events than its budget holds points, and its budget is unchanged', async () => {
    const listening = server.nextSubscription();
    const carol = subscriber(server.url, users.carol);
    const sub = carol.subscribe('subscription { orderCreated { id } }');
    await listening;
    // Other users' writes, each charged to its writer (one point each): twice the subscriber's budget in events.
    const placed: string[] = [];
    for (const writer of [users.alice, users.bob]) {
      for (let i = 0; i < BUDGET; i++) {
        const res = await server.gql(
          'mutation { createOrder(input: { items: [{ sku: "KB-001", qty: 1 }] }) { id } }',
          {},
          { token: writer },
        );
        assert.equal(res.body.errors, undefined, JSON.stringify(res.body.errors));
        placed.push((res.body.data as { createOrder: { id: string } }).createOrder.id);
      }
    }
    await sub.next(2 * BUDGET);
    assert.deepEqual(
      sub.received.map((r) => (r.data as { orderCreated: { id: string } }).orderCreated.id),
      placed,
    );
    assert.ok(sub.received.every((r) => r.errors === undefined));
    // One point for the subscribe, one for this query: the events cost carol nothing.
    const res = await server.gql('{ viewer { subject } }', {}, { token: users.carol });
    assert.equal(res.body.errors, undefined);
    assert.equal((res.body as { extensions?: { cost: { remaining: number } } }).extensions?.cost.remaining, BUDGET - 2);
    await carol.dispose();
  });
});

describe('anonymous HTTP GraphQL callers each spend their own address’s budget', () => {
  let server: TestServer;
  beforeAll(async () => {
    // One proxy hop trusted, so X-Forwarded-For names the client, as behind the compose nginx.
    server = await startTestServer({ RATE_LIMIT_POINTS: '1', RATE_LIMIT_WINDOW_S: '600', TRUST_PROXY: '1' });
  });
  afterAll(() => server.close());

  // Apollo runs each operation with a copy of the context it is given: the address must travel with the copy.
  test('one address spending its budget leaves another’s untouched', async () => {
    const ask = (address: string) =>
      request(server.url).get('/graphql?query={products{sku}}').set('x-forwarded-for', address);
    assert.equal((await ask('203.0.113.7')).status, 200);
    const refused = await ask('203.0.113.7');
    assert.equal(refused.status, 429);
    assert.equal(refused.body.errors[0].extensions.code, 'RATE_LIMITED');
    const other = await ask('198.51.100.9');
    assert.equal(other.status, 200);
    assert.equal(other.body.extensions.cost.remaining, 0);
  });
});

describe('anonymous GraphQL callers over HTTP', () => {
  let server: TestServer;
  beforeAll(async () => {
    // One proxy hop is trusted, so the test can speak from different client addresses.
    server = await startTestServer({ RATE_LIMIT_POINTS: '3', RATE_LIMIT_WINDOW_S: '600', TRUST_PROXY: '1' });
  });
  afterAll(() => server.close());

  test('are keyed by their address: one address spending its budget leaves the others theirs', async () => {
    const send = (ip: string) =>
      request(server.url).post('/graphql').set('x-forwarded-for', ip).send({ query: '{ __typename }' });
    for (let left = 2; left >= 0; left--) {
      const res = await send('203.0.113.7').expect(200);
      assert.equal(res.headers.ratelimit, `"orders";r=${left};t=600`);
      assert.equal(res.body.extensions.cost.remaining, left);
    }
    const refused = await send('203.0.113.7').expect(429);
    assert.equal(refused.body.errors[0].extensions.code, 'RATE_LIMITED');
    const elsewhere = await send('203.0.113.8').expect(200);
    assert.deepEqual(elsewhere.body.data, { __typename: 'Query' });
    assert.equal(elsewhere.headers.ratelimit, `"orders";r=2;t=600`);
  });
});
