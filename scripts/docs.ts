import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { generatedFiles } from './readme/generated.js';

// npm run docs [-- --check]: writes the generated documentation — docs/errors.md from the error catalogue, and the
// client recipes' regions in README.md and docs/*.md from examples/. --check only reports which files are out of
// date, exiting 1 when any is.
const { values } = parseArgs({ options: { check: { type: 'boolean', default: false } } });
const stale = (await generatedFiles(process.cwd())).filter(({ current, expected }) => current !== expected);
for (const { file, expected } of stale) {
  if (values.check) console.error(`${file} is out of date with the error catalogue or examples/: run npm run docs`);
  else {
    writeFileSync(file, expected);
    console.error(`${file} updated`);
  }
}
if (values.check && stale.length) process.exitCode = 1;
