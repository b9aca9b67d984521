#!/usr/bin/env node
// Sums Jest JSON results (`jest --json --outputFile=NAME.json`) over every run of a CI job, run by run, and prints
// one line per run and a last plain line, `N passed, M failed`. Exits 1 when a test failed, a suite failed to run, a
// file is missing or unreadable, a run executed no test at all, or a run executed fewer tests than its floor: a run
// whose files were renamed out of its pattern must not look green.
//   node scripts/jest-summary.mjs [--floors .ci/test-floors.json] results/embedded.json results/production.json …
// The floors file maps a run's name (its result file's name without .json) to the tests it is known to hold.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals: files } = parseArgs({
  options: { floors: { type: 'string' } },
  allowPositionals: true,
});
const floors = values.floors ? JSON.parse(readFileSync(values.floors, 'utf8')) : {};
let passed = 0;
let failed = 0;
for (const file of files) {
  const run = basename(file, '.json');
  let result;
  try {
    result = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    console.error(
      `jest-summary: ${run}: no Jest result in ${file} (${error instanceof Error ? error.message : error})`,
    );
    failed++;
    continue;
  }
  const runPassed = result.numPassedTests ?? 0;
  const runFailed = result.numFailedTests ?? 0;
  // A file that failed to load (syntax error, failing beforeAll with no test) counts as a failed suite.
  let broken = result.numRuntimeErrorTestSuites ?? 0;
  if (result.success === false && !runFailed && !broken) broken++;
  const executed = runPassed + runFailed;
  const floor = Math.max(1, floors[run] ?? 1);
  console.log(
    `${run}: ${runPassed} passed, ${runFailed + broken} failed, ${result.numPendingTests ?? 0} skipped` +
      (floors[run] ? ` (holds at least ${floors[run]})` : ''),
  );
  if (executed < floor) {
    console.error(
      executed === 0
        ? `jest-summary: ${run} executed no test: a run that ran nothing fails`
        : `jest-summary: ${run} executed ${executed} tests, fewer than the ${floor} it is known to hold (${values.floors})`,
    );
    broken++;
  }
  passed += runPassed;
  failed += runFailed + broken;
}
console.log(`${passed} passed, ${failed} failed`);
if (!files.length || failed) process.exit(1);
