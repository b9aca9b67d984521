import { nodeType } from '../domain/nodes.js';
import type { NodeResolvers } from '../generated/graphql.js';

export const Node: NodeResolvers = {
  __resolveType: (node) => nodeType(node),
};
