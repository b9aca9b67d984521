import {
  getNamedType,
  isEnumType,
  TypeInfo,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type GraphQLSchema,
} from 'graphql';
import { Counter, type Registry } from 'prom-client';
import type { Principal } from '../../domain/policy.js';

/** Distinct client labels kept before the rest count as `other`: the label set stays bounded. */
const MAX_CLIENTS = 50;

/** The deprecated fields, arguments and enum values a document uses, as `Type.field`, `Type.field(arg)`, `Enum.VALUE`. */
export function deprecatedUses(schema: GraphQLSchema, document: DocumentNode): string[] {
  const used = new Set<string>();
  const info = new TypeInfo(schema);
  visit(
    document,
    visitWithTypeInfo(info, {
      Field() {
        const field = info.getFieldDef();
        const parent = info.getParentType();
        if (field?.deprecationReason && parent) used.add(`${parent.name}.${field.name}`);
      },
      Argument() {
        const arg = info.getArgument();
        const field = info.getFieldDef();
        const parent = info.getParentType();
        if (arg?.deprecationReason && field && parent) used.add(`${parent.name}.${field.name}(${arg.name})`);
      },
      EnumValue(node) {
        const type = info.getInputType() && getNamedType(info.getInputType()!);
        const value = isEnumType(type) ? type.getValue(node.value) : undefined;
        if (type && value?.deprecationReason) used.add(`${type.name}.${value.name}`);
      },
    }),
  );
  return [...used];
}

/**
 * `graphql_deprecated_uses_total{member, client}`: who still relies on what is deprecated, so that a
 * removal is decided from data. The client is the OAuth client the access token was issued to.
 */
export function createDeprecationMetric(registry: Registry) {
  const counter = new Counter({
    name: 'graphql_deprecated_uses_total',
    help: 'Operations that used a deprecated field, argument or enum value, by member and OAuth client.',
    labelNames: ['member', 'client'] as const,
    registers: [registry],
  });
  const clients = new Set<string>();
  const clientLabel = (principal: Principal) => {
    const id = principal.kind === 'user' ? (principal.clientId ?? 'unknown') : 'anonymous';
    if (clients.has(id) || clients.size < MAX_CLIENTS) {
      clients.add(id);
      return id;
    }
    return 'other';
  };
  return {
    /** Counts an operation's `uses` (its prepared record's deprecations) for this caller. */
    record(uses: readonly string[], principal: Principal) {
      if (!uses.length) return;
      const client = clientLabel(principal);
      for (const member of uses) counter.inc({ member, client });
    },
  };
}
