import {
  Kind,
  type GraphQLError,
  type DocumentNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationRule,
} from 'graphql';
import { clientError } from '../problems/index.js';

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
 * Depth, aliases, directives, mutation fields and introspection's nesting, for every operation of a
 * document. Each fragment is measured once and cached, so a chain of fragments that each spread the
 * next twice costs linear time rather than doubling per level (what made the old depth limit freeze
 * the event loop). A plain walk of the syntax tree, without graphql's validation machinery, so that
 * transports can refuse a hostile document before paying for the full validation.
 */
export function limitErrors(document: DocumentNode, limits: StaticLimits): GraphQLError[] {
  const errors: GraphQLError[] = [];
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of document.definitions) {
    if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
  }
  // Keyed by mode too: a fragment spread inside introspection is measured by introspection's bounds.
  const memo = new Map<string, Shape>();
  const visiting = new Set<string>();
  const report = (message: string, node: OperationDefinitionNode | SelectionSetNode['selections'][number]) =>
    errors.push(clientError(message, 'GRAPHQL_VALIDATION_FAILED', {}, { nodes: [node] }));

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
        inner = sel.selectionSet ? measure(sel.selectionSet, introspection || entersIntrospection) : EMPTY;
        if (entersIntrospection) {
          if (inner.depth + 1 > INTROSPECTION_MAX_DEPTH || inner.lists > INTROSPECTION_MAX_LISTS) {
            report(
              `Introspection may nest at most ${INTROSPECTION_MAX_DEPTH} levels and ${INTROSPECTION_MAX_LISTS} lists.`,
              sel,
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

  for (const node of document.definitions) {
    if (node.kind !== Kind.OPERATION_DEFINITION) continue;
    const shape = measure(node.selectionSet, false);
    const directives = shape.directives + (node.directives?.length ?? 0);
    if (shape.depth > limits.maxDepth)
      report(`The operation is nested ${shape.depth} levels deep; at most ${limits.maxDepth} are allowed.`, node);
    if (shape.aliases > limits.maxAliases)
      report(`The operation uses ${shape.aliases} aliases; at most ${limits.maxAliases} are allowed.`, node);
    if (directives > limits.maxDirectives)
      report(`The operation uses ${directives} directives; at most ${limits.maxDirectives} are allowed.`, node);
    if (node.operation === 'mutation' && shape.fields > limits.maxMutations)
      report(`The operation has ${shape.fields} mutation fields; at most ${limits.maxMutations} are allowed.`, node);
  }
  return errors;
}

/** The same limits as a validation rule, for Apollo's validation of documents it looks up by hash. */
export function staticLimits(limits: StaticLimits): ValidationRule {
  return (context) => ({
    Document(node) {
      for (const error of limitErrors(node, limits)) context.reportError(error);
    },
  });
}
