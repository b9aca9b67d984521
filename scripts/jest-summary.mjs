#!/usr/bin/env node
// Sums Jest JSON results (`jest --json --outputFile=FILE`) over every run of a CI job and prints one plain line,
// `N passed, M failed`. Exits 1 when a test failed, a suite failed to run, a file is missing or unreadable, or no
// test ran at all: a run that executed nothing must not look green.
//   node scripts/jest-summary.mjs results/unit.json results/prod.json …
import { readFileSync } from 'node:fs';

const files = process.argv.slice(2);
let passed = 0;
let failed = 0;
let broken = 0;
for (const file of files) {
  let result;
  try {
    result = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    console.error(`jest-summary: no Jest result in ${file} (${error instanceof Error ? error.message : error})`);
    broken++;
    continue;
  }
  passed += result.numPassedTests ?? 0;
  failed += result.numFailedTests ?? 0;
  // A file that failed to load (syntax error, failing beforeAll with no test) counts as a failed suite.
  broken += result.numRuntimeErrorTestSuites ?? 0;
  if (result.success === false && !result.numFailedTests && !result.numRuntimeErrorTestSuites) broken++;
}
console.log(`${passed} passed, ${failed + broken} failed`);
if (!files.length || failed || broken || passed === 0) process.exit(1);
