import {
  GraphQLError,
  Kind,
  type ASTVisitor,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
} from 'graphql';

/** How deep any operation may nest, on every transport. */
export const MAX_DEPTH = 12;

/**
 * Rejects operations nested deeper than `max` fields. The schema has cycles
 * (Order → Customer → orders → …), so without a bound one request could fan out without end.
 */
export function depthLimit(max: number) {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const def of context.getDocument().definitions) {
      if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
    }

    function depth(set: SelectionSetNode | undefined, visiting: Set<string>): number {
      if (!set) return 0;
      let deepest = 0;
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) {
          deepest = Math.max(deepest, sel.selectionSet ? 1 + depth(sel.selectionSet, visiting) : 1);
        } else if (sel.kind === Kind.INLINE_FRAGMENT) {
          deepest = Math.max(deepest, depth(sel.selectionSet, visiting));
        } else {
          const name = sel.name.value;
          const fragment = fragments.get(name);
          // Unknown or cyclic fragments are reported by the standard rules.
          if (!fragment || visiting.has(name)) continue;
          visiting.add(name);
          deepest = Math.max(deepest, depth(fragment.selectionSet, visiting));
          visiting.delete(name);
        }
        if (deepest > max) return deepest;
      }
      return deepest;
    }

    return {
      OperationDefinition(node) {
        const found = depth(node.selectionSet, new Set());
        if (found > max) {
          context.reportError(
            new GraphQLError(`The operation is nested ${found} levels deep; at most ${max} are allowed.`, {
              nodes: [node],
              extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
            }),
          );
        }
      },
    };
  };
}
