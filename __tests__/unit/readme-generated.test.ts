import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, test } from '@jest/globals';
import { ERROR_CODES } from '../../src/domain/errors.js';
import { documentationFiles } from '../../scripts/readme/files.js';
import { ERRORS_PAGE, PROBLEM_TYPES, errorTable, generatedFiles } from '../../scripts/readme/generated.js';

const ROOT = process.cwd();

describe('the documentation written from its sources (npm run docs)', () => {
  test('is up to date: docs/errors.md with the catalogue, the client recipes with examples/', async () => {
    const files = await generatedFiles(ROOT);
    assert.ok(files.some((f) => f.file === 'README.md') && files.some((f) => f.file === ERRORS_PAGE));
    const stale = files.filter(({ current, expected }) => current !== expected).map(({ file }) => file);
    assert.deepEqual(stale, [], `out of date: ${stale.join(', ')}; run npm run docs`);
    const recipes = files.flatMap(({ current }) => [...(current ?? '').matchAll(/<!-- generated:example:(\S+) -->/g)]);
    assert.deepEqual(recipes.map((m) => m[1]).sort(), [
      'examples/sse-resume.ts',
      'examples/webhook-receiver.ts',
      'examples/ws-fresh-tokens.ts',
      'examples/ws-resume.ts',
    ]);
  });

  test('the error table has a row for every code of the catalogue, and docs/errors.md holds it', () => {
    const table = errorTable();
    for (const code of [...ERROR_CODES, ...Object.keys(PROBLEM_TYPES)]) {
      assert.match(table, new RegExp(`^\\| \`${code}\` \\| \\d{3} \\|`, 'm'), code);
    }
    assert.match(readFileSync(ERRORS_PAGE, 'utf8'), /^\| code +\| HTTP \| title +\| problem type +\| meaning/m);
  });
});

describe('the documentation names files that exist', () => {
  test('every path under src/, __tests__/, scripts/, examples/, deploy/ or bench/ in README.md and docs/*.md', () => {
    const missing: string[] = [];
    for (const file of documentationFiles(ROOT)) {
      const text = readFileSync(file, 'utf8');
      // A path starts the token it is in (not `dist/src/…`) and ends before punctuation that closes a sentence.
      for (const [path] of text.matchAll(
        /(?<![\w./-])(?:src|__tests__|scripts|examples|deploy|bench)\/[\w./-]*[\w/]/g,
      )) {
        if (!existsSync(path)) missing.push(`${file}: ${path}`);
      }
    }
    assert.deepEqual(missing, []);
  });
});
