import { GraphQLObjectType, responsePathAsArray, type GraphQLFieldResolver, type GraphQLSchema } from 'graphql';
import { tracing, type Span } from '../../tracing.js';

/** The operation span's name until the operation is known (OpenTelemetry's GraphQL convention for that case). */
export const OPERATION_SPAN = 'GraphQL Operation';

/**
 * Names and attributes an operation's span by OpenTelemetry's GraphQL conventions: `query RecentOrders`, with
 * `graphql.operation.type` and `graphql.operation.name`, and the document's sha256 — never its text (a client's
 * document may inline values) and never its variables.
 */
export function nameOperation(span: Span, type: string, name: string | null | undefined, sha256: string | undefined) {
  span.updateName(name ? `${type} ${name}` : type);
  span.setAttributes({
    'graphql.operation.type': type,
    'graphql.operation.name': name ?? undefined,
    'orders.graphql.document.sha256': sha256,
  });
}

/**
 * OTEL_GRAPHQL_RESOLVER_SPANS=true, for debugging: a span around every field that has a resolver of its own (default
 * property reads stay as they are), named `Type.field`, with the field's path. Off by default: a span per field is
 * what makes per-resolver instrumentation cost ten times the execution it watches.
 */
export function withResolverSpans(schema: GraphQLSchema): GraphQLSchema {
  for (const type of Object.values(schema.getTypeMap())) {
    if (!(type instanceof GraphQLObjectType) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      const resolve = field.resolve as GraphQLFieldResolver<unknown, unknown> | undefined;
      if (!resolve) continue;
      const name = `${type.name}.${field.name}`;
      field.resolve = (source, args, context, info) =>
        tracing.inSpan(
          name,
          {
            attributes: {
              'graphql.field.name': field.name,
              'graphql.field.type': String(field.type),
              'graphql.field.path': responsePathAsArray(info.path).join('.'),
            },
          },
          () => resolve(source, args, context, info),
        );
    }
  }
  return schema;
}
