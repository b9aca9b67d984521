/** A JSON object (a GraphQL "map"): not null, not an array. */
export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** What a client sends, on any transport, before it is checked. */
export interface OperationParams {
  readonly query?: unknown;
  readonly operationName?: unknown;
  readonly variables?: unknown;
  readonly extensions?: unknown;
  /** graphql-codegen's trusted-document id: the document's sha256, bare or as `sha256:<hex>`. */
  readonly documentId?: unknown;
}

/**
 * The parameters of one GraphQL-over-HTTP request, parsed once (from the query string of a GET, from the JSON body of
 * a POST) and checked: what every later step reads — persisted documents, the result cache and Apollo's hooks.
 */
export interface GraphqlParams extends OperationParams {
  readonly query?: string;
  readonly operationName?: string | null;
  readonly variables?: Record<string, unknown> | null;
  readonly extensions?: Record<string, unknown> | null;
  /** A GET's: the length of its longer JSON parameter (variables or extensions) as sent, before parsing. */
  readonly sentJsonLength?: number;
}

/** A GET that names no operation at all (a browser opening /graphql): nothing to parse. */
export const NO_PARAMS: GraphqlParams = Object.freeze({});

/** The hash a request names its document by, if any. */
export function namedHash(params: OperationParams): string | undefined {
  const persisted = isRecord(params.extensions) ? params.extensions.persistedQuery : undefined;
  if (isRecord(persisted) && typeof persisted.sha256Hash === 'string') return persisted.sha256Hash;
  if (typeof params.documentId === 'string') return params.documentId.replace(/^sha256:/, '');
  return undefined;
}

/** Checks the parameter map shared by GET and POST; returns the first problem found. */
function problemOf(params: OperationParams): string | undefined {
  const { query, operationName, variables, extensions } = params;
  // A trusted document may be named by graphql-codegen's documentId instead.
  const persisted =
    (isRecord(extensions) && isRecord(extensions.persistedQuery)) || typeof params.documentId === 'string';
  if (query === undefined && !persisted) return 'The query parameter is required.';
  if (query !== undefined && typeof query !== 'string') return 'The query parameter must be a string.';
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') {
    return 'The operationName parameter must be a string or null.';
  }
  if (variables !== undefined && variables !== null && !isRecord(variables)) {
    return 'The variables parameter must be a map or null.';
  }
  if (extensions !== undefined && extensions !== null && !isRecord(extensions)) {
    return 'The extensions parameter must be a map or null.';
  }
  return undefined;
}

function jsonParam(value: unknown, name: string): { value?: unknown; error?: string } {
  if (value === undefined) return {};
  if (typeof value !== 'string') return { error: `The ${name} parameter may be given only once.` };
  try {
    return { value: JSON.parse(value) };
  } catch {
    return { error: `The ${name} parameter must be URL-encoded JSON.` };
  }
}

/**
 * A GET's parameters from its query string (as Express parsed it: a repeated parameter is an array), or the problem
 * with them. `variables` and `extensions` are URL-encoded JSON.
 */
export function paramsOfQuery(q: Record<string, unknown>): GraphqlParams | string {
  if (Array.isArray(q.query) || Array.isArray(q.operationName)) return 'Each parameter may be given only once.';
  const variables = jsonParam(q.variables, 'variables');
  const extensions = jsonParam(q.extensions, 'extensions');
  const params = {
    query: q.query,
    documentId: q.documentId,
    operationName: q.operationName,
    variables: variables.value,
    extensions: extensions.value,
    sentJsonLength: Math.max(lengthOf(q.variables), lengthOf(q.extensions)),
  };
  return variables.error ?? extensions.error ?? problemOf(params) ?? (params as GraphqlParams);
}

const lengthOf = (value: unknown) => (typeof value === 'string' ? value.length : 0);

/** A POST's parameters: its JSON body, once checked to be one operation's parameter map (or the problem with it). */
export function paramsOfBody(body: unknown): GraphqlParams | string {
  if (Array.isArray(body)) return 'Batched requests are not supported; send one operation per request.';
  if (!isRecord(body)) return 'The request body must be a JSON object.';
  // The body itself, once checked, is the parameter map: nothing is copied.
  return problemOf(body) ?? (body as GraphqlParams);
}
