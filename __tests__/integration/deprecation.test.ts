import assert from 'node:assert/strict';
import request from 'supertest';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface FieldInfo {
  name: string;
  isDeprecated: boolean;
  deprecationReason: string | null;
}

describe('deprecation is a promise: the deprecated member works, says so, and its uses are counted', () => {
  let server: TestServer;
  let alice: string;
  beforeAll(async () => {
    server = await startTestServer();
    alice = await server.token('alice');
  });
  afterAll(() => server.close());

  /** `graphql_deprecated_uses_total{member=…,client=…}` from /metrics; 0 before the first use. */
  async function uses(member: string, client: string): Promise<number> {
    const res = await request(server.running.metricsUrl!).get('/metrics').expect(200);
    const line = (res.text as string)
      .split('\n')
      .find((l) => l.startsWith(`graphql_deprecated_uses_total{member="${member}",client="${client}"} `));
    return line ? Number(line.split(' ').pop()) : 0;
  }

  test('Order.status still answers, as the lower-case twin of the typed Order.state', async () => {
    const { status, body } = await server.gql('{ recentOrders(first: 5) { status state } }', undefined, {
      token: alice,
    });
    assert.equal(status, 200);
    const orders = (body.data as { recentOrders: { status: string; state: string }[] }).recentOrders;
    assert.equal(orders.length, 5);
    for (const order of orders) assert.equal(order.status, order.state.toLowerCase());
    assert.deepEqual(body.errors, undefined);
  });

  test('introspection reports Order.status as deprecated, with the reason, and hides it unless asked', async () => {
    const { body } = await server.gql(`{
      all: __type(name: "Order") { fields(includeDeprecated: true) { name isDeprecated deprecationReason } }
      current: __type(name: "Order") { fields { name } }
    }`);
    const data = body.data as { all: { fields: FieldInfo[] }; current: { fields: { name: string }[] } };
    assert.deepEqual(
      data.all.fields.find((f) => f.name === 'status'),
      {
        name: 'status',
        isDeprecated: true,
        deprecationReason: 'Use `state`: the same value as a typed enum, so clients can match it exhaustively.',
      },
    );
    assert.deepEqual(
      data.all.fields.find((f) => f.name === 'state'),
      { name: 'state', isDeprecated: false, deprecationReason: null },
    );
    assert.equal(
      data.current.fields.some((f) => f.name === 'status'),
      false,
    );
  });

  test('each operation that selects Order.status counts once for the OAuth client of its token', async () => {
    const before = await uses('Order.status', 'orders-mobile');
    await server.gql('{ a: recentOrders(first: 1) { status } b: recentOrders(first: 2) { status } }', undefined, {
      token: alice,
    });
    await server.gql('{ recentOrders(first: 1) { state } }', undefined, { token: alice });
    assert.equal(await uses('Order.status', 'orders-mobile'), before + 1);
  });
});
