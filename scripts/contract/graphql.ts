import { ChangeType, CriticalityLevel, diff, type Change, type Rule } from '@graphql-inspector/core';
import {
  buildSchema,
  getNamedType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  type GraphQLSchema,
} from 'graphql';
import type { ContractChange } from './openapi.js';

const isDeprecated = (member: { deprecationReason?: string | null | undefined } | undefined) =>
  Boolean(member?.deprecationReason);

/** Whether the released member a removal names was marked @deprecated (so clients were told). */
function wasDeprecated(change: Change, released: GraphQLSchema): boolean {
  const [typeName, member, argName] = (change.path ?? '').split('.');
  const type = typeName ? released.getType(typeName) : undefined;
  if (!type) return false;
  switch (change.type) {
    case ChangeType.FieldRemoved:
      return (isObjectType(type) || isInterfaceType(type)) && isDeprecated(type.getFields()[member!]);
    case ChangeType.InputFieldRemoved:
      return isInputObjectType(type) && isDeprecated(type.getFields()[member!]);
    case ChangeType.EnumValueRemoved:
      return 'getValue' in type && isDeprecated(type.getValue(member!) ?? undefined);
    case ChangeType.FieldArgumentRemoved: {
      if (!(isObjectType(type) || isInterfaceType(type))) return false;
      return isDeprecated(type.getFields()[member!]?.args.find((a) => a.name === argName));
    }
    case ChangeType.TypeRemoved:
      // A type may go only with the deprecated fields that were its last uses.
      return Object.values(released.getTypeMap()).every(
        (owner) =>
          !(isObjectType(owner) || isInterfaceType(owner)) ||
          Object.values(owner.getFields()).every((f) => getNamedType(f.type) !== type || isDeprecated(f)),
      );
    default:
      return false;
  }
}

/**
 * Removing a field, argument, input field or enum value is breaking unless the released schema had already
 * deprecated it; then it is only dangerous. (graphql-inspector's own suppressRemovalOfDeprecatedField skips
 * arguments and lets any removed type through.)
 */
const removalOfDeprecatedIsDangerous: Rule = ({ changes, oldSchema }) =>
  changes.map((change) =>
    change.criticality.level === CriticalityLevel.Breaking && oldSchema && wasDeprecated(change, oldSchema)
      ? { ...change, criticality: { ...change.criticality, level: CriticalityLevel.Dangerous } }
      : change,
  );

/** Every change from the released schema to the current one, classified by graphql-inspector. */
export async function graphqlChanges(releasedSdl: string, currentSdl: string): Promise<ContractChange[]> {
  const changes = await diff(buildSchema(releasedSdl), buildSchema(currentSdl), [removalOfDeprecatedIsDangerous]);
  const level = { BREAKING: 'breaking', DANGEROUS: 'dangerous', NON_BREAKING: 'safe' } as const;
  return changes.map((c) => ({ level: level[c.criticality.level], message: c.message }));
}
