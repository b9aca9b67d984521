import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROBLEM_TYPES, problemTypeUri, type ApiErrorCode } from '../../src/http/problems/catalogue.js';

/**
 * Parts of README.md that are written from their source rather than by hand, each between
 * `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`:
 * - `errors`: the error table, from the one catalogue (src/http/problems.ts over src/domain/errors.ts);
 * - `example:FILE`: a client recipe, the file under examples/ that the test suite runs.
 * `npm run docs` rewrites them; a unit test fails when README.md is not what this would write.
 */
const REGION = /(<!-- generated:([\w.:/-]+) -->)[\s\S]*?(<!-- \/generated:\2 -->)/g;

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\n/g, ' ');
}

export function errorTable(): string {
  const rows = (Object.entries(PROBLEM_TYPES) as [ApiErrorCode, (typeof PROBLEM_TYPES)[ApiErrorCode]][])
    .sort(([a, x], [b, y]) => x.status - y.status || a.localeCompare(b))
    .map(
      ([code, type]) => `| \`${code}\` | ${type.status} | \`${problemTypeUri(code)}\` | ${cell(type.description)} |`,
    );
  return ['| code | HTTP | problem type | meaning |', '| --- | --- | --- | --- |', ...rows].join('\n');
}

function example(root: string, file: string): string {
  if (!/^examples\/[\w.-]+\.ts$/.test(file)) throw new Error(`not an example file: ${file}`);
  return ['```ts', readFileSync(path.join(root, file), 'utf8').trimEnd(), '```'].join('\n');
}

/** README.md with every generated region rewritten from its source. */
export function renderReadme(readme: string, root: string): string {
  return readme.replace(REGION, (_all, open: string, name: string, close: string) => {
    if (name === 'errors') return `${open}\n${errorTable()}\n${close}`;
    if (name.startsWith('example:')) return `${open}\n${example(root, name.slice('example:'.length))}\n${close}`;
    throw new Error(`README.md: unknown generated region ${name}`);
  });
}
