import {
  getNamedType,
  getNullableType,
  isCompositeType,
  isListType,
  isObjectType,
  Kind,
  valueFromAST,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

/** A page that names no size is taken at the schema's default, else this (GitHub and Shopify do the same). */
export const DEFAULT_PAGE = 20;

/** Every list field caps `first` at this, so the estimate never needs more. */
export const MAX_PAGE = 100;
/** A write costs more than a read of the object it returns. */
export const MUTATION_COST = 10;

/**
 * The static cost of one operation, computed from the document, the schema and the variables before
 * anything runs: an object costs 1, a scalar 0, a list multiplies its children by its page size
 * (`first` or `last`, from the literal, the variable or the schema's default; for a connection's `edges` and `nodes`,
 * the connection's own `first` or `last`), a mutation field costs
 * MUTATION_COST. Introspection costs 1 per `__schema`/`__type`: the static limits bound its shape.
 * Fragments are costed once per type and reused, so the computation is linear in the document.
 */
export function operationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | null | undefined,
): number {
  return costOf(schema, document, operation, variables).cost;
}

/**
 * operationCost, and whether it read a variable (a `first: $n`): an operation that reads none always costs the same,
 * so its prepared record keeps the figure (prepared.ts).
 */
export function costOf(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | null | undefined,
): { cost: number; readsVariables: boolean } {
  let readsVariables = false;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of document.definitions) {
    if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
  }
  const memo = new Map<string, number>();
  const visiting = new Set<string>();
  const vars = variables ?? {};

  /** The page a field asks for with `first` or `last` (a connection takes either), or undefined when it takes neither. */
  function pageSize(field: GraphQLField<unknown, unknown>, node: FieldNode): number | undefined {
    let size: number | undefined;
    for (const name of ['first', 'last']) {
      const arg = field.args.find((a) => a.name === name);
      if (!arg) continue;
      const given = node.arguments?.find((a) => a.name.value === name);
      let value: unknown = arg.defaultValue;
      if (given) {
        // An unusable value is refused when variables are coerced; until then, assume the default page.
        if (given.value.kind !== Kind.INT) readsVariables = true;
        const literal = valueFromAST(given.value, arg.type, vars as Record<string, unknown>);
        if (typeof literal === 'number' && Number.isInteger(literal)) value = literal;
      }
      if (typeof value === 'number') size = Math.max(size ?? 0, value);
      else size ??= DEFAULT_PAGE;
    }
    return size === undefined ? undefined : Math.min(MAX_PAGE, Math.max(0, size));
  }

  /**
   * `page` is the size a connection asked for (its `first`/`last`), handed to its own fields: its lists (`edges`,
   * `nodes`) take no page argument of their own and hold that many, as in GitHub's rule.
   */
  function cost(
    set: SelectionSetNode,
    parent: GraphQLNamedType | undefined,
    root: boolean,
    page: number | undefined = undefined,
  ): number {
    let total = 0;
    for (const sel of set.selections) {
      if (sel.kind === Kind.INLINE_FRAGMENT) {
        const type = sel.typeCondition ? schema.getType(sel.typeCondition.name.value) : parent;
        total += cost(sel.selectionSet, type ?? undefined, root, page);
      } else if (sel.kind === Kind.FRAGMENT_SPREAD) {
        total += spread(sel.name.value, root, page);
      } else {
        const name = sel.name.value;
        if (name === '__schema' || name === '__type') {
          total += 1;
          continue;
        }
        if (!isObjectType(parent)) continue;
        const field = parent.getFields()[name];
        if (!field) continue;
        const type = getNamedType(field.type);
        const self = root && parent === schema.getMutationType() ? MUTATION_COST : isCompositeType(type) ? 1 : 0;
        if (!self) continue;
        const asked = pageSize(field, sel);
        const list = isListType(getNullableType(field.type));
        // A connection (an object that takes a page size) passes its size down to its lists.
        const children = sel.selectionSet ? cost(sel.selectionSet, type, false, list ? undefined : asked) : 0;
        const size = list ? (asked ?? page ?? DEFAULT_PAGE) : 1;
        total += size * (self + children);
      }
    }
    return total;
  }

  function spread(name: string, root: boolean, page: number | undefined): number {
    const key = `${root ? 'r' : 'n'}:${page ?? ''}:${name}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    const fragment = fragments.get(name);
    if (!fragment || visiting.has(key)) return 0;
    visiting.add(key);
    const value = cost(
      fragment.selectionSet,
      schema.getType(fragment.typeCondition.name.value) ?? undefined,
      root,
      page,
    );
    visiting.delete(key);
    memo.set(key, value);
    return value;
  }

  const rootType =
    operation.operation === 'mutation'
      ? schema.getMutationType()
      : operation.operation === 'subscription'
        ? schema.getSubscriptionType()
        : schema.getQueryType();
  return { cost: cost(operation.selectionSet, rootType ?? undefined, true), readsVariables };
}
