import {
  Kind,
  visit,
  type ASTNode,
  type DirectiveNode,
  type GraphQLError,
  type GraphQLSchema,
  type DocumentNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
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

/** What a schema says about directives: the names it defines, and which of them may repeat on one location. */
export interface DirectiveRules {
  readonly known: ReadonlySet<string>;
  readonly repeatable: ReadonlySet<string>;
}

export function directiveRulesOf(schema: GraphQLSchema): DirectiveRules {
  const directives = schema.getDirectives();
  return {
    known: new Set(directives.map((d) => d.name)),
    repeatable: new Set(directives.filter((d) => d.isRepeatable).map((d) => d.name)),
  };
}

/**
 * graphql's validation reports every use of an unknown directive, and every repeat of one that may appear once per
 * location, as an error of its own: `__typename @aa@aa@aa…` turns one mistake into as many errors as the document
 * has room for (graphql-cop's "Directive Overloading"). Up to this many are left to validation, which names each;
 * beyond it the document is refused with one error.
 */
export const MAX_INVALID_DIRECTIVES = 3;

/** How many directives of a document are unknown or repeated where they may appear once, and the first of them. */
function invalidDirectives(document: DocumentNode, rules: DirectiveRules) {
  let count = 0;
  let first: DirectiveNode | undefined;
  const names = new Set<string>();
  visit(document, {
    enter(node: ASTNode) {
      const directives = (node as { directives?: readonly DirectiveNode[] }).directives;
      if (!directives?.length) return;
      const seen = new Set<string>();
      for (const directive of directives) {
        const name = directive.name.value;
        if (!rules.known.has(name) || (seen.has(name) && !rules.repeatable.has(name))) {
          count += 1;
          first ??= directive;
          names.add(name);
        }
        seen.add(name);
      }
    },
  });
  return { count, first, names: [...names] };
}

function directiveLimitError(document: DocumentNode, rules: DirectiveRules): GraphQLError | undefined {
  const invalid = invalidDirectives(document, rules);
  if (invalid.count <= MAX_INVALID_DIRECTIVES) return undefined;
  // A few names are enough to find the mistake; the rest of the list would only echo the document back.
  const named = invalid.names.slice(0, 3).map((n) => `@${n}`);
  if (invalid.names.length > named.length) named.push('…');
  return clientError(
    `The document uses ${invalid.count} unknown or repeated directives (${named.join(', ')}); at most ` +
      `${MAX_INVALID_DIRECTIVES} are reported one by one.`,
    'GRAPHQL_VALIDATION_FAILED',
    {},
    { nodes: [invalid.first!] },
  );
}

/**
 * Depth, aliases, directives, mutation fields and introspection's nesting, for every operation of a
 * document; given the schema's `directives`, also the unknown and repeated ones (MAX_INVALID_DIRECTIVES).
 * Each fragment is measured once and cached, so a chain of fragments that each spread the
 * next twice costs linear time rather than doubling per level (what made the old depth limit freeze
 * the event loop). A plain walk of the syntax tree, without graphql's validation machinery, so that
 * transports can refuse a hostile document before paying for the full validation.
 */
export function limitErrors(document: DocumentNode, limits: StaticLimits, directives?: DirectiveRules): GraphQLError[] {
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
  const flood = directives && directiveLimitError(document, directives);
  if (flood) errors.push(flood);
  return errors;
}
