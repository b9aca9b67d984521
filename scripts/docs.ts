import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { format, resolveConfig } from 'prettier';
import { renderReadme } from './readme/generated.js';

// npm run docs [-- --check]: rewrites README.md's generated regions (error table, client recipes); --check only
// reports whether README.md is up to date, exiting 1 when it is not.
const { values } = parseArgs({ options: { check: { type: 'boolean', default: false } } });
const current = readFileSync('README.md', 'utf8');
const options = { ...(await resolveConfig('README.md')), filepath: 'README.md' };
const next = await format(renderReadme(current, process.cwd()), options);
if (values.check) {
  if (next !== current) {
    console.error('README.md is out of date with the error catalogue or examples/: run npm run docs');
    process.exitCode = 1;
  }
} else if (next !== current) {
  writeFileSync('README.md', next);
  console.error('README.md updated');
}
