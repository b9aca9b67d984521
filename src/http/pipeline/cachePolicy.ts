import {
  getNamedType,
  isCompositeType,
  Kind,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  isObjectType,
  isInterfaceType,
  type ConstDirectiveNode,
  type DirectiveNode,
  valueFromASTUntyped,
  visit,
  BREAK,
} from 'graphql';

export type Scope = 'PUBLIC' | 'PRIVATE';

/** A response's cache policy as Apollo's cache-control plugin computes it: the most restrictive of its hints. */
export interface CachePolicy {
  readonly maxAge: number | undefined;
  readonly scope: Scope | undefined;
}

interface Hint {
  maxAge?: number | undefined;
  scope?: Scope | undefined;
  inheritMaxAge?: boolean;
}

/** The `Cache-Control` header of a response with this policy, exactly as Apollo's plugin writes it. */
export function cacheControlHeader(policy: CachePolicy | undefined): string {
  const cacheable = policy && policyIfCacheable(policy);
  return cacheable ? `max-age=${cacheable.maxAge}, ${cacheable.scope.toLowerCase()}` : 'no-store';
}

export function policyIfCacheable(policy: CachePolicy): { maxAge: number; scope: Scope } | null {
  if (policy.maxAge === undefined || policy.maxAge === 0) return null;
  return { maxAge: policy.maxAge, scope: policy.scope ?? 'PUBLIC' };
}

function hintFromDirectives(directives: readonly (ConstDirectiveNode | DirectiveNode)[] | undefined): Hint | undefined {
  const directive = directives?.find((d) => d.name.value === 'cacheControl');
  if (!directive?.arguments) return undefined;
  const arg = (name: string) => directive.arguments!.find((a) => a.name.value === name)?.value;
  const scopeNode = arg('scope');
  const scopeName = scopeNode?.kind === Kind.ENUM ? scopeNode.value : undefined;
  const scope = scopeName === 'PUBLIC' || scopeName === 'PRIVATE' ? scopeName : undefined;
  const inherit = arg('inheritMaxAge');
  if (inherit?.kind === Kind.BOOLEAN && inherit.value) return { inheritMaxAge: true, scope };
  const maxAge = arg('maxAge');
  return { maxAge: maxAge?.kind === Kind.INT ? parseInt(maxAge.value, 10) : undefined, scope };
}

const typeHints = new WeakMap<GraphQLNamedType, Hint>();
function typeHint(type: GraphQLCompositeType): Hint {
  let hint = typeHints.get(type);
  if (!hint) {
    hint = hintFromDirectives(type.astNode?.directives) ?? {};
    for (const node of type.extensionASTNodes ?? []) hint = hintFromDirectives(node.directives) ?? hint;
    typeHints.set(type, hint);
  }
  return hint;
}

class Policy implements CachePolicy {
  maxAge: number | undefined = undefined;
  scope: Scope | undefined = undefined;
  restrict(hint: Hint) {
    if (hint.maxAge !== undefined && (this.maxAge === undefined || hint.maxAge < this.maxAge))
      this.maxAge = hint.maxAge;
    if (hint.scope !== undefined && this.scope !== 'PRIVATE') this.scope = hint.scope;
  }
  replace(hint: Hint) {
    if (hint.maxAge !== undefined) this.maxAge = hint.maxAge;
    if (hint.scope !== undefined) this.scope = hint.scope;
  }
}

/** Does the document decide at run time which fields run (@skip/@include)? Then its policy depends on variables. */
export function hasConditionalFields(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Directive(node) {
      if (node.name.value === 'skip' || node.name.value === 'include') {
        found = true;
        return BREAK;
      }
      return undefined;
    },
  });
  return found;
}

function included(node: FieldNode | { directives?: readonly DirectiveNode[] }, variables: Record<string, unknown>) {
  for (const directive of node.directives ?? []) {
    const name = directive.name.value;
    if (name !== 'skip' && name !== 'include') continue;
    const arg = directive.arguments?.find((a) => a.name.value === 'if');
    const value = arg ? valueFromASTUntyped(arg.value, variables) : undefined;
    if (name === 'skip' && value === true) return false;
    if (name === 'include' && value !== true) return false;
  }
  return true;
}

/**
 * The policy Apollo's cache-control plugin would arrive at for this operation, worked out from the schema's
 * `@cacheControl` hints instead of by wrapping every resolver: each field of the operation contributes the hint
 * of its type and of its definition, and composite or root fields with no maxAge count as 0 (no-store).
 * (The plugin counts only fields that resolve; for this schema that is the same answer, because no public
 * field sits under a nullable object whose absence would lift a restriction.) Meta fields (`__typename`,
 * introspection) carry no hint, as with the plugin.
 */
export function derivePolicy(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> = {},
): CachePolicy {
  const overall = new Policy();
  for (const def of operation.variableDefinitions ?? []) {
    const name = def.variable.name.value;
    if (def.defaultValue && variables[name] === undefined)
      variables = { ...variables, [name]: valueFromASTUntyped(def.defaultValue) };
  }
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of document.definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
  const root = schema.getRootType(operation.operation);
  if (!root) return overall;

  const visit = (parent: GraphQLCompositeType, selections: SelectionSetNode, isRoot: boolean, seen: Set<string>) => {
    for (const selection of selections.selections) {
      if (!included(selection, variables)) continue;
      if (selection.kind === Kind.INLINE_FRAGMENT) {
        const type = selection.typeCondition ? schema.getType(selection.typeCondition.name.value) : parent;
        if (type && isCompositeType(type)) visit(type, selection.selectionSet, isRoot, seen);
        continue;
      }
      if (selection.kind === Kind.FRAGMENT_SPREAD) {
        const name = selection.name.value;
        const fragment = fragments.get(name);
        if (!fragment || seen.has(name)) continue;
        const type = schema.getType(fragment.typeCondition.name.value);
        if (type && isCompositeType(type)) visit(type, fragment.selectionSet, isRoot, new Set(seen).add(name));
        continue;
      }
      const fieldName = selection.name.value;
      if (fieldName.startsWith('__')) continue;
      const field: GraphQLField<unknown, unknown> | undefined =
        isObjectType(parent) || isInterfaceType(parent) ? parent.getFields()[fieldName] : undefined;
      if (!field) continue;
      const fieldPolicy = new Policy();
      let inheritMaxAge = false;
      const target = getNamedType(field.type);
      const composite = isCompositeType(target);
      if (composite) {
        const hint = typeHint(target);
        fieldPolicy.replace(hint);
        inheritMaxAge = Boolean(hint.inheritMaxAge);
      }
      const fieldHint = fieldHints(field);
      if (fieldHint.inheritMaxAge && fieldPolicy.maxAge === undefined) {
        inheritMaxAge = true;
        if (fieldHint.scope) fieldPolicy.replace({ scope: fieldHint.scope });
      } else fieldPolicy.replace(fieldHint);
      if (fieldPolicy.maxAge === undefined && ((composite && !inheritMaxAge) || isRoot))
        fieldPolicy.restrict({ maxAge: 0 });
      overall.restrict(fieldPolicy);
      if (composite && selection.selectionSet) visit(target, selection.selectionSet, false, seen);
    }
  };
  visit(root, operation.selectionSet, true, new Set());
  return { maxAge: overall.maxAge, scope: overall.scope };
}

const fieldHintCache = new WeakMap<object, Hint>();
function fieldHints(field: GraphQLField<unknown, unknown>): Hint {
  let hint = fieldHintCache.get(field);
  if (!hint) {
    hint = hintFromDirectives(field.astNode?.directives) ?? {};
    fieldHintCache.set(field, hint);
  }
  return hint;
}
