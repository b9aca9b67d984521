import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { execute, parse, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { DomainError } from '../../src/domain/errors.js';
import { formatResult } from '../../src/http/problems/graphqlErrors.js';
import { createJitExecutor } from '../../src/http/pipeline/jitExecutor.js';
import { DateTime } from '../../src/resolvers/DateTime.js';

/**
 * graphql-js and the graphql-jit executor must give the same answer to the same operation: data, null
 * propagation, error messages, paths and locations, and the same masking once formatted as HTTP responses
 * are (production policy: unexpected errors become INTERNAL_SERVER_ERROR, domain errors keep their code).
 */
const typeDefs = /* GraphQL */ `
  scalar DateTime
  enum Colour {
    RED
    GREEN
  }
  input Filter {
    colour: Colour!
    min: Int = 0
  }
  type Item {
    id: ID!
    name: String
    mustHave: String!
    colour: Colour!
    at: DateTime!
    child: Item
    strictChild: Item!
    domainFailure: String
    unexpectedFailure: String
    asyncUnexpected: String!
    tags: [String!]
    looseTags: [String]
  }
  type Query {
    item(id: ID!): Item
    strictItem: Item!
    items(filter: Filter, first: Int = 2): [Item!]!
    looseItems: [Item]!
    echo(at: DateTime!, colour: Colour, n: Int!): String!
    throwsDomain: String
    throwsUnexpected: String!
  }
  type Mutation {
    touch(id: ID!): Item
    fail: Item!
  }
`;

interface Row {
  id: string;
  at: string;
}
const rows = (n: number): Row[] =>
  Array.from({ length: n }, (_, i) => ({ id: `i${i}`, at: `2026-11-2${i % 10}T09:30:00.12${i % 10}Z` }));

const resolvers = {
  DateTime,
  Query: {
    item: (_: unknown, { id }: { id: string }) => (id === 'none' ? null : { id, at: '2026-11-22T09:30:00.000Z' }),
    strictItem: () => null,
    items: (_: unknown, args: { filter?: { colour: string; min: number }; first: number }) =>
      Promise.resolve(rows(args.first).map((r) => ({ ...r, filterColour: args.filter?.colour }))),
    looseItems: () => [{ id: 'a', at: '2026-11-22T09:30:00Z' }, null, { id: 'c', at: new Date(0) }],
    echo: (_: unknown, args: { at: Date; colour?: string; n: number }) =>
      `${args.at.toISOString()} ${args.colour ?? '-'} ${args.n}`,
    throwsDomain: () => {
      throw new DomainError('FORBIDDEN', 'You may not.');
    },
    throwsUnexpected: async () => {
      throw new Error('connection string postgres://secret leaked');
    },
  },
  Mutation: {
    touch: (_: unknown, { id }: { id: string }) => ({ id, at: '2026-11-22T09:30:00.000Z' }),
    fail: () => Promise.reject(new DomainError('NOT_FOUND', 'Order was not found.')),
  },
  Item: {
    name: (item: Row) => (item.id.endsWith('1') ? null : `Item ${item.id}`),
    mustHave: (item: Row) => (item.id === 'i1' ? null : 'here'),
    colour: (item: Row & { filterColour?: string }) => item.filterColour ?? 'RED',
    child: (item: Row) => (item.id.length > 3 ? null : { id: `${item.id}c`, at: item.at }),
    strictChild: (item: Row) => (item.id === 'i0' ? null : Promise.resolve({ id: `${item.id}s`, at: item.at })),
    domainFailure: () => Promise.reject(new DomainError('PRECONDITION_FAILED', 'It changed.')),
    unexpectedFailure: () => {
      throw new TypeError("Cannot read properties of undefined (reading 'x')");
    },
    asyncUnexpected: async () => {
      throw new Error('boom');
    },
    tags: (item: Row) => (item.id === 'i1' ? ['a', null, 'c'] : ['a', 'b']),
    looseTags: () => ['a', null],
  },
};

const schema: GraphQLSchema = makeExecutableSchema({ typeDefs, resolvers: resolvers as never });
const jit = createJitExecutor(schema);
const policy = { hideSuggestions: true };

async function both(query: string, variables?: Record<string, unknown>, operationName?: string) {
  const document = parse(query);
  const reference = (await execute({
    schema,
    document,
    variableValues: variables,
    operationName,
    contextValue: {},
  })) as ExecutionResult;
  const compiled = await jit.execute(`h:${query}`, document, operationName, variables, {});
  const format = (r: ExecutionResult) => formatResult(r, undefined, () => {}, policy);
  return { reference, compiled, formatted: [format(reference), format(compiled)] as const };
}

const plain = (value: unknown) => (value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as unknown));

const cases: [string, string, Record<string, unknown>?, string?][] = [
  ['scalars, enums, a custom scalar and nested objects', '{ item(id: "i0") { id name colour at child { id } } }'],
  ['a nullable root returning null', '{ item(id: "none") { id } }'],
  ['a non-null root returning null nulls all data', '{ strictItem { id } }'],
  ['null propagation from a non-null field to its nullable parent', '{ item(id: "i1") { id mustHave } }'],
  [
    'null propagation inside a non-null list to the nullable root',
    '{ items(first: 3) { id mustHave strictChild { id } } }',
  ],
  ['null propagation through a non-null child object', '{ items(first: 1) { id strictChild { id } } }'],
  ['a null inside a list of non-null strings', '{ items(first: 2) { tags } }'],
  ['nulls allowed in a loose list', '{ looseItems { id at } item(id: "x") { looseTags } }'],
  ['a domain error keeps its code', '{ throwsDomain item(id: "i0") { domainFailure } }'],
  ['unexpected errors are masked, sync and async', '{ item(id: "i0") { unexpectedFailure } }'],
  ['an unexpected error on a non-null root field', '{ throwsUnexpected }'],
  ['an async unexpected error nulls its non-null parent', '{ items(first: 2) { id asyncUnexpected } }'],
  [
    'aliases, fragments and __typename',
    '{ a: item(id: "i0") { ...F } b: item(id: "i1") { ...F } } fragment F on Item { __typename id n: name }',
  ],
  [
    '@skip and @include with variables',
    'query($s: Boolean!) { item(id: "i0") { id name @skip(if: $s) colour @include(if: $s) } }',
    { s: true },
  ],
  [
    'input objects with enums and defaults',
    'query($f: Filter) { items(filter: $f) { id colour } }',
    { f: { colour: 'GREEN' } },
  ],
  [
    'variables coerced: custom scalar, enum, int',
    'query($at: DateTime!, $c: Colour, $n: Int!) { echo(at: $at, colour: $c, n: $n) }',
    { at: '2026-11-22T09:30:00Z', c: 'GREEN', n: 3 },
  ],
  ['a bad custom scalar variable', 'query($at: DateTime!) { echo(at: $at, n: 1) }', { at: 'yesterday' }],
  ['a bad enum variable', 'query($c: Colour) { echo(at: "2026-11-22T09:30:00Z", colour: $c, n: 1) }', { c: 'BLUE' }],
  ['a missing required variable', 'query($n: Int!) { echo(at: "2026-11-22T09:30:00Z", n: $n) }', {}],
  ['an int variable out of range', 'query($n: Int!) { echo(at: "2026-11-22T09:30:00Z", n: $n) }', { n: 2 ** 40 }],
  ['a bad input object variable', 'query($f: Filter) { items(filter: $f) { id } }', { f: { colour: 'RED', extra: 1 } }],
  ['a mutation', 'mutation { touch(id: "m1") { id at } }'],
  ['a failing non-null mutation field', 'mutation { fail { id } }'],
  ['a named operation among several', 'query A { item(id: "i0") { id } } query B { strictItem { id } }', {}, 'A'],
];

describe('graphql-jit gives the answers graphql-js gives', () => {
  test.each(cases)('%s', async (...row) => {
    const [, query, variables, operationName] = row;
    const { reference, compiled, formatted } = await both(query, variables, operationName);
    // Raw results: the same data and the same errors (message, path, locations), in the same order.
    assert.deepEqual(plain(compiled.data), plain(reference.data));
    assert.deepEqual(
      compiled.errors?.map((e) => plain(e.toJSON())),
      reference.errors?.map((e) => plain(e.toJSON())),
    );
    // Apollo reads `extensions` (and a thrown error's own extensions ride along), so they must be alike too.
    assert.deepEqual(
      compiled.errors?.map((e) => plain(e.extensions)),
      reference.errors?.map((e) => plain(e.extensions)),
    );
    // As sent over HTTP: masked the same way, byte for byte.
    assert.equal(JSON.stringify(formatted[1]), JSON.stringify(formatted[0]));
  });

  test('the cases do exercise errors, masking and null propagation', async () => {
    const masked = await both('{ item(id: "i0") { unexpectedFailure } }');
    assert.deepEqual(plain(masked.formatted[1]), {
      data: { item: { unexpectedFailure: null } },
      errors: [
        {
          message: 'Internal server error',
          locations: [{ line: 1, column: 20 }],
          path: ['item', 'unexpectedFailure'],
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        },
      ],
    });
    const propagated = await both('{ items(first: 3) { id mustHave } }');
    assert.equal(propagated.compiled.data, null);
    assert.deepEqual(propagated.compiled.errors?.[0]?.path, ['items', 1, 'mustHave']);
  });

  test('compiled operations are kept per document and operation, bounded in number', async () => {
    const small = createJitExecutor(schema, { maxEntries: 2 });
    for (const id of ['a', 'b', 'c']) {
      const q = `{ item(id: "${id}") { id } }`;
      const result = await small.execute(q, parse(q), undefined, undefined, {});
      assert.deepEqual(plain(result), { data: { item: { id } } });
    }
    assert.equal(small.size, 2);
  });
});
