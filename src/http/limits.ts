import {
  GraphQLError,
  Kind,
  type ASTVisitor,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';

export interface StaticLimits {
  readonly maxDepth: number;
  readonly maxAliases: number;
  readonly maxDirectives: number;
  readonly maxMutations: number;
}

/**
 * Introspection (`__schema`, `__type`) is exempt from the depth limit, since graphql's own
 * getIntrospectionQuery() nests 15 levels through `ofType`. Its subtree has bounds of its own instead:
 * the standard query nests three lists (types → fields → args); more would multiply without end.
 */
const INTROSPECTION_MAX_DEPTH = 20;
const INTROSPECTION_MAX_LISTS = 3;
const INTROSPECTION_LISTS = new Set([
  'types',
  'fields',
  'args',
  'inputFields',
  'interfaces',
  'possibleTypes',
  'enumValues',
  'directives',
]);

/** What one selection set holds, its fragments included: computed once per fragment, then reused. */
interface Shape {
  depth: number;
  /** Deepest nesting of introspection's own lists. */
  lists: number;
  aliases: number;
  directives: number;
  /** Fields on the selection set itself (through fragments), for the mutation count. */
  fields: number;
}

const EMPTY: Shape = { depth: 0, lists: 0, aliases: 0, directives: 0, fields: 0 };

/**
 * One validation rule for depth, aliases, directives, mutation fields and introspection's nesting. Each
 * fragment is measured once and cached, so a chain of fragments that each spread the next twice costs
 * linear time rather than doubling per level (what made the old depth limit freeze the event loop).
 */
export function staticLimits(limits: StaticLimits): ValidationRule {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const def of context.getDocument().definitions) {
      if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
    }
    // Keyed by mode too: a fragment spread inside introspection is measured by introspection's bounds.
    const memo = new Map<string, Shape>();
    const visiting = new Set<string>();

    function measure(set: SelectionSetNode, introspection: boolean): Shape {
      const out: Shape = { ...EMPTY };
      for (const sel of set.selections) {
        out.directives += sel.directives?.length ?? 0;
        let inner: Shape;
        let ownDepth = 0;
        let ownList = 0;
        if (sel.kind === Kind.FIELD) {
          out.fields += 1;
          if (sel.alias) out.aliases += 1;
          const name = sel.name.value;
          const entersIntrospection = !introspection && (name === '__schema' || name === '__type');
          const mode = introspection || entersIntrospection;
          inner = sel.selectionSet ? measure(sel.selectionSet, mode) : EMPTY;
          if (entersIntrospection) {
            if (inner.depth + 1 > INTROSPECTION_MAX_DEPTH || inner.lists > INTROSPECTION_MAX_LISTS) {
              context.reportError(
                new GraphQLError(
                  `Introspection may nest at most ${INTROSPECTION_MAX_DEPTH} levels and ${INTROSPECTION_MAX_LISTS} lists.`,
                  { nodes: [sel], extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } },
                ),
              );
            }
            inner = { ...inner, depth: 0, lists: 0 };
          } else {
            ownDepth = 1;
            ownList = introspection && INTROSPECTION_LISTS.has(name) ? 1 : 0;
          }
        } else if (sel.kind === Kind.INLINE_FRAGMENT) {
          inner = measure(sel.selectionSet, introspection);
        } else {
          inner = spread(sel.name.value, introspection);
        }
        out.depth = Math.max(out.depth, ownDepth + inner.depth);
        out.lists = Math.max(out.lists, ownList + inner.lists);
        out.aliases += inner.aliases;
        out.directives += inner.directives;
        if (sel.kind !== Kind.FIELD) out.fields += inner.fields;
      }
      return out;
    }

    function spread(name: string, introspection: boolean): Shape {
      const key = `${introspection ? 'i' : 'o'}:${name}`;
      const known = memo.get(key);
      if (known) return known;
      const fragment = fragments.get(name);
      // Unknown and cyclic fragments are reported by the standard rules.
      if (!fragment || visiting.has(key)) return EMPTY;
      visiting.add(key);
      const shape = measure(fragment.selectionSet, introspection);
      shape.directives += fragment.directives?.length ?? 0;
      visiting.delete(key);
      memo.set(key, shape);
      return shape;
    }

    const refuse = (node: OperationDefinitionNode, message: string) =>
      context.reportError(
        new GraphQLError(message, { nodes: [node], extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }),
      );

    return {
      OperationDefinition(node) {
        const shape = measure(node.selectionSet, false);
        const directives = shape.directives + (node.directives?.length ?? 0);
        if (shape.depth > limits.maxDepth)
          refuse(node, `The operation is nested ${shape.depth} levels deep; at most ${limits.maxDepth} are allowed.`);
        if (shape.aliases > limits.maxAliases)
          refuse(node, `The operation uses ${shape.aliases} aliases; at most ${limits.maxAliases} are allowed.`);
        if (directives > limits.maxDirectives)
          refuse(node, `The operation uses ${directives} directives; at most ${limits.maxDirectives} are allowed.`);
        if (node.operation === 'mutation' && shape.fields > limits.maxMutations)
          refuse(
            node,
            `The operation has ${shape.fields} mutation fields; at most ${limits.maxMutations} are allowed.`,
          );
      },
    };
  };
}
