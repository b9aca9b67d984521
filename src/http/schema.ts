import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeExecutableSchema } from '@graphql-tools/schema';
import type { GraphQLSchema } from 'graphql';
import { resolvers } from '../resolvers/index.js';

function loadTypeDefs(): string {
  // Works from src/ under tsx and from dist/src/ after compiling.
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const candidate = join(dir, 'schema.graphql');
    if (existsSync(candidate)) return readFileSync(candidate, 'utf8');
  }
  throw new Error('schema.graphql not found');
}

/** One executable schema for every transport: HTTP (Apollo), WebSocket and SSE. */
export function buildSchema(): GraphQLSchema {
  return makeExecutableSchema({ typeDefs: loadTypeDefs(), resolvers });
}
