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
 * (`first`, from the literal, the variable or the schema's default), a mutation field costs
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

/** Costs of operations that read no variable, per document (documents are kept and reused by Apollo's store). */
const fixedCosts = new WeakMap<DocumentNode, Map<OperationDefinitionNode, number>>();

/**
 * operationCost, remembered for an operation whose cost reads no variable (no `first: $n`): the same document
 * then always costs the same, so a document sent again is not walked again.
 */
export function rememberedOperationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | null | undefined,
): number {
  const known = fixedCosts.get(document)?.get(operation);
  if (known !== undefined) return known;
  const { cost, readsVariables } = costOf(schema, document, operation, variables);
  if (!readsVariables) {
    let costs = fixedCosts.get(document);
    if (!costs) fixedCosts.set(document, (costs = new Map()));
    costs.set(operation, cost);
  }
  return cost;
}

function costOf(
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

  function pageSize(field: GraphQLField<unknown, unknown>, node: FieldNode): number {
    const arg = field.args.find((a) => a.name === 'first');
    if (!arg) return DEFAULT_PAGE;
    const given = node.arguments?.find((a) => a.name.value === 'first');
    let value: unknown = arg.defaultValue ?? DEFAULT_PAGE;
    if (given) {
      // An unusable value is refused when variables are coerced; until then, assume the default page.
      if (given.value.kind !== Kind.INT) readsVariables = true;
      const literal = valueFromAST(given.value, arg.type, vars as Record<string, unknown>);
      if (typeof literal === 'number' && Number.isInteger(literal)) value = literal;
    }
    return Math.min(MAX_PAGE, Math.max(0, Number(value)));
  }

  function cost(set: SelectionSetNode, parent: GraphQLNamedType | undefined, root: boolean): number {
    let total = 0;
    for (const sel of set.selections) {
      if (sel.kind === Kind.INLINE_FRAGMENT) {
        const type = sel.typeCondition ? schema.getType(sel.typeCondition.name.value) : parent;
        total += cost(sel.selectionSet, type ?? undefined, root);
      } else if (sel.kind === Kind.FRAGMENT_SPREAD) {
        total += spread(sel.name.value, root);
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
        const children = sel.selectionSet ? cost(sel.selectionSet, type, false) : 0;
        const size = isListType(getNullableType(field.type)) ? pageSize(field, sel) : 1;
        total += size * (self + children);
      }
    }
    return total;
  }

  function spread(name: string, root: boolean): number {
    const key = `${root ? 'r' : 'n'}:${name}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    const fragment = fragments.get(name);
    if (!fragment || visiting.has(key)) return 0;
    visiting.add(key);
    const value = cost(fragment.selectionSet, schema.getType(fragment.typeCondition.name.value) ?? undefined, root);
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
