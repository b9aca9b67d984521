import { BREAK, getNamedType, isIntrospectionType, type ValidationRule } from 'graphql';
import { clientError } from '../problems/index.js';

/**
 * Production's introspection policy: graphql's NoSchemaIntrospectionCustomRule, in its words, except that a
 * document is refused with one error, for its first introspection field, rather than one per field
 * (getIntrospectionQuery() selects 39).
 */
export const noIntrospection: ValidationRule = (context) => ({
  Field(node) {
    const type = getNamedType(context.getType());
    if (!type || !isIntrospectionType(type)) return undefined;
    context.reportError(
      clientError(
        `GraphQL introspection has been disabled, but the requested query contained the field "${node.name.value}".`,
        'GRAPHQL_VALIDATION_FAILED',
        {},
        { nodes: [node] },
      ),
    );
    // Ends this rule's walk only; the other rules go on validating the document.
    return BREAK;
  },
});
