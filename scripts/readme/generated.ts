import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { format, resolveConfig } from 'prettier';
import { PROBLEM_TYPES, problemTypeUri, type ApiErrorCode } from '../../src/http/problems/catalogue.js';
import { documentationFiles } from './files.js';

/** The catalogue, for the tests: the one place the documentation imports it from (it moves with src/http). */
export { PROBLEM_TYPES };

/**
 * The documentation written from its sources rather than by hand:
 * - docs/errors.md, the whole file, from the one error catalogue (`PROBLEM_TYPES`, over src/domain/errors.ts);
 * - in README.md and docs/*.md, each region between `<!-- generated:example:FILE -->` and
 *   `<!-- /generated:example:FILE -->`: a client recipe, the file under examples/ that the test suite runs.
 * `npm run docs` writes them; `npm run docs -- --check` and a unit test fail when a file is not what it would write.
 */
export const ERRORS_PAGE = 'docs/errors.md';

const REGION = /(<!-- generated:([\w.:/-]+) -->)[\s\S]*?(<!-- \/generated:\2 -->)/g;

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\n/g, ' ');
}

export function errorTable(): string {
  const rows = (Object.entries(PROBLEM_TYPES) as [ApiErrorCode, (typeof PROBLEM_TYPES)[ApiErrorCode]][])
    .sort(([a, x], [b, y]) => x.status - y.status || a.localeCompare(b))
    .map(
      ([code, type]) =>
        `| \`${code}\` | ${type.status} | ${cell(type.title)} | \`${problemTypeUri(code)}\` | ${cell(type.description)} |`,
    );
  return ['| code | HTTP | title | problem type | meaning |', '| --- | --- | --- | --- | --- |', ...rows].join('\n');
}

/** docs/errors.md: what the codes are, how each transport sends them, and the table. */
export function errorsPage(): string {
  return `<!-- Written by npm run docs from the error catalogue (PROBLEM_TYPES): edit the catalogue, not this file. -->

# Error codes

One catalogue serves GraphQL's \`extensions.code\` and, for the REST endpoints, the problem \`type\` URI
\`/problems/<slug>\`: \`PROBLEM_TYPES\`, the problem catalogue under \`src/http/\`, registers every code once (status,
title, page), and its keys are the typed union \`ApiErrorCode\` that every problem, GraphQL error and the start-up
\`503\` are built from. The domain's own codes (\`src/domain/errors.ts\`) must all be registered there, or the build
fails. Each type URI is a page this API serves (\`GET /problems/<slug>\`: the title, status, code and meaning).

How each transport sends a code:

- **REST** (\`/v1\`): \`application/problem+json\` (RFC 9457) with \`type\`, \`title\`, \`status\`, \`detail\`, \`instance\`,
  plus \`code\` and, for \`422\`, \`errors\`: \`[{pointer, reason}]\` — see [rest.md](rest.md).
- **GraphQL over HTTP**: each error carries \`extensions.code\`; request errors come back without \`data\`, with the
  status the GraphQL-over-HTTP spec asks for — see [graphql.md](graphql.md#over-http). Unexpected errors are masked
  as \`INTERNAL_SERVER_ERROR\`.
- **WebSocket and SSE**: an error result with the same \`extensions.code\`; what ends a connection or a stream (close
  codes \`4400\`, \`4401\`, \`4403\`, \`4408\`, \`1008\`…) is in [subscriptions.md](subscriptions.md).

GraphQL's own request errors use Apollo's codes: \`GRAPHQL_PARSE_FAILED\`, \`GRAPHQL_VALIDATION_FAILED\`,
\`BAD_USER_INPUT\` (variables), \`OPERATION_RESOLUTION_FAILURE\`, \`PERSISTED_QUERY_NOT_FOUND\`, and \`BAD_REQUEST\` for
malformed HTTP requests. The pipeline adds \`QUERY_TOO_COMPLEX\`, \`RATE_LIMITED\`, \`PERSISTED_QUERY_HASH_MISMATCH\`
and \`PERSISTED_QUERY_NOT_TRUSTED\`; the streaming transports \`TOO_MANY_SUBSCRIPTIONS\`. They are in the same
catalogue, each with a page under \`/problems/\`.

${errorTable()}
`;
}

function example(root: string, file: string): string {
  if (!/^examples\/[\w.-]+\.ts$/.test(file)) throw new Error(`not an example file: ${file}`);
  return ['```ts', readFileSync(path.join(root, file), 'utf8').trimEnd(), '```'].join('\n');
}

/** A Markdown file with every generated region rewritten from its source. */
export function renderRegions(text: string, root: string, file: string): string {
  return text.replace(REGION, (_all, open: string, name: string, close: string) => {
    if (name.startsWith('example:')) return `${open}\n${example(root, name.slice('example:'.length))}\n${close}`;
    throw new Error(`${file}: unknown generated region ${name}`);
  });
}

export interface GeneratedFile {
  readonly file: string;
  /** The file as it is on disk; null when it does not exist yet. */
  readonly current: string | null;
  /** The file as `npm run docs` writes it, formatted by Prettier with the project's settings. */
  readonly expected: string;
}

/** Every documentation file as it is and as `npm run docs` would write it. */
export async function generatedFiles(root: string): Promise<GeneratedFile[]> {
  const files = [...new Set([...documentationFiles(root), ERRORS_PAGE])];
  return Promise.all(
    files.map(async (file) => {
      const full = path.join(root, file);
      const current = existsSync(full) ? readFileSync(full, 'utf8') : null;
      const text = file === ERRORS_PAGE ? errorsPage() : renderRegions(current ?? '', root, file);
      const expected = await format(text, { ...(await resolveConfig(full)), filepath: full });
      return { file, current, expected };
    }),
  );
}
