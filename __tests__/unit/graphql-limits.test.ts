import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { getOperationAST, parse } from 'graphql';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { operationCost } from '../../src/http/pipeline/cost.js';
import { limitErrors } from '../../src/http/pipeline/limits.js';
import { pointsFor } from '../../src/http/pipeline/pipeline.js';
import { buildSchema } from '../../src/resolvers/schema.js';

const schema = buildSchema();
const LIMITS = { maxDepth: 12, maxAliases: 15, maxDirectives: 50, maxMutations: 10 };

const costOf = (query: string, variables: Record<string, unknown> = {}) => {
  const document = parse(query);
  return operationCost(schema, document, getOperationAST(document)!, variables);
};

describe('static cost of an operation', () => {
  test('objects cost 1, scalars 0, and a list multiplies its children by its page size', () => {
    assert.equal(costOf('{ recentOrders(first: 100) { id status customer { id name } } }'), 200);
    assert.equal(costOf('{ viewer { subject } }'), 1);
    assert.equal(costOf('{ __typename }'), 0);
  });

  test("the page size comes from the literal, the variable, or the schema's default, capped at 100", () => {
    assert.equal(costOf('{ recentOrders { customer { id } } }'), 40);
    assert.equal(costOf('query($n: Int) { recentOrders(first: $n) { customer { id } } }', { n: 7 }), 14);
    assert.equal(costOf('query($n: Int) { recentOrders(first: $n) { customer { id } } }'), 40);
    assert.equal(costOf('{ recentOrders(first: 5000) { customer { id } } }'), 200);
  });

  test('a mutation field costs 10 plus what it returns', () => {
    assert.equal(costOf('mutation { cancelOrder(id: "x") { id customer { id } } }'), 11);
  });

  test("the issue's 143-byte query costs about 102 million; fragments count like inline selections", () => {
    const fanOut =
      '{ recentOrders(first:100) { customer { orders(first:100) { customer { orders(first:100) { customer { orders(first:100) { id }}}}}}}}';
    assert.equal(costOf(fanOut), 102_020_200);
    const viaFragment = '{ recentOrders(first: 100) { ...O } } fragment O on Order { customer { id } }';
    assert.equal(costOf(viaFragment), 200);
  });

  test('the budget is spent in points of 100, at least one', () => {
    assert.deepEqual([0, 1, 100, 101, 200].map(pointsFor), [1, 1, 1, 2, 2]);
  });
});

describe('static limits', () => {
  const chained = (levels: number) =>
    `{ recentOrders { customer { ...F0 } } } ` +
    Array.from({ length: levels }, (_, i) =>
      i === levels - 1
        ? `fragment F${i} on Customer { id }`
        : `fragment F${i} on Customer { id orders { customer { ...F${i + 1} } } ...F${i + 1} }`,
    ).join(' ');

  test('a chain of 200 doubly spread fragments is measured (one visit per fragment) and refused', () => {
    const errors = limitErrors(parse(chained(200)), LIMITS);
    assert.equal(errors.length, 1);
    assert.match(errors[0]!.message, /nested 401 levels deep; at most 12/);
  });

  test('the standard introspection nesting passes; one more list is refused', () => {
    const ok = '{ __schema { types { fields { args { type { ofType { ofType { name } } } } } } } }';
    assert.deepEqual(limitErrors(parse(ok), LIMITS), []);
    const deeper = '{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }';
    assert.match(limitErrors(parse(deeper), LIMITS)[0]!.message, /Introspection may nest/);
  });
});

describe('limit settings', () => {
  test('defaults, and every bad value listed', () => {
    const config = loadConfig({});
    assert.deepEqual(config.graphql, {
      maxDepth: 12,
      maxAliases: 15,
      maxDirectives: 50,
      maxTokens: 1000,
      maxCost: 10_000,
      maxSubscriptionCost: 200,
      maxMutations: 10,
      apq: { maxBytes: 8192, maxEntries: 2000 },
    });
    try {
      loadConfig({
        MAX_QUERY_DEPTH: '0',
        MAX_TOKENS: 'many',
        MAX_SUBSCRIPTION_COST: '0',
        PERSISTED_DOCUMENTS: '/nonexistent/manifest.json',
      });
      assert.fail('expected a ConfigError');
    } catch (error) {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(
        error.problems.map((p) => p.split(':')[0]),
        ['MAX_QUERY_DEPTH', 'MAX_TOKENS', 'MAX_SUBSCRIPTION_COST', 'PERSISTED_DOCUMENTS'],
      );
    }
  });

  test('production needs DATABASE_URL unless an open database is handed in', () => {
    const env = { NODE_ENV: 'production', OIDC_ISSUER: 'https://idp.example' };
    assert.throws(() => loadConfig(env), /DATABASE_URL: is required in production/);
    assert.equal(loadConfig(env, { databaseHandedIn: true }).isProduction, true);
  });
});
