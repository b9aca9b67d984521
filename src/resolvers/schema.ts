import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeExecutableSchema } from '@graphql-tools/schema';
import type { IResolvers } from '@graphql-tools/utils';
import { GraphQLScalarType, type GraphQLSchema } from 'graphql';
import { resolvers } from './index.js';

function loadTypeDefs(): string {
  // Works from src/ under tsx and from dist/src/ after compiling.
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const candidate = join(dir, 'schema.graphql');
    if (existsSync(candidate)) return readFileSync(candidate, 'utf8');
  }
  throw new Error('schema.graphql not found');
}

/**
 * graphql-tools copies every key of a scalar's GraphQLScalarType onto the SDL's scalar, `description: undefined`
 * included, which erased the schema's description of DateTime. Only what the implementation sets is passed on, so
 * schema.graphql stays the one place for descriptions.
 */
function withoutUnsetKeys(map: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(map).map(([name, value]) => [
      name,
      value instanceof GraphQLScalarType
        ? Object.fromEntries(Object.entries(value.toConfig()).filter(([, v]) => v !== undefined && v !== null))
        : value,
    ]),
  );
}

/** One executable schema for every transport: HTTP (Apollo), WebSocket and SSE. */
export function buildSchema(): GraphQLSchema {
  return makeExecutableSchema({ typeDefs: loadTypeDefs(), resolvers: withoutUnsetKeys(resolvers) as IResolvers });
}
