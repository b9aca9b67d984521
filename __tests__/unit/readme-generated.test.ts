import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from '@jest/globals';
import { format, resolveConfig } from 'prettier';
import { ERROR_CODES } from '../../src/domain/errors.js';
import { PROBLEM_TYPES } from '../../src/http/problems/catalogue.js';
import { errorTable, renderReadme } from '../../scripts/readme/generated.js';

const readme = readFileSync('README.md', 'utf8');

describe('README.md regions written from their sources (npm run docs)', () => {
  test('are up to date: the error table with the catalogue, the client recipes with examples/', async () => {
    const expected = await format(renderReadme(readme, process.cwd()), {
      ...(await resolveConfig('README.md')),
      filepath: 'README.md',
    });
    assert.ok(expected === readme, 'README.md is out of date: run npm run docs');
  });

  test('the error table has a row for every code of the catalogue', () => {
    const table = errorTable();
    for (const code of [...ERROR_CODES, ...Object.keys(PROBLEM_TYPES)]) {
      assert.match(table, new RegExp(`^\\| \`${code}\` \\| \\d{3} \\|`, 'm'), code);
    }
    assert.match(readme, /<!-- generated:errors -->\n\n\| code +\| HTTP \| problem type +\| meaning/);
  });
});
