import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, test } from '@jest/globals';

const dir = mkdtempSync(join(tmpdir(), 'jest-summary-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A Jest --json result of one run, as much of it as the summary reads. */
function run(name: string, counts: { passed?: number; failed?: number; pending?: number; runtimeErrors?: number }) {
  const file = join(dir, `${name}.json`);
  const { passed = 0, failed = 0, pending = 0, runtimeErrors = 0 } = counts;
  writeFileSync(
    file,
    JSON.stringify({
      success: failed === 0 && runtimeErrors === 0,
      numPassedTests: passed,
      numFailedTests: failed,
      numPendingTests: pending,
      numRuntimeErrorTestSuites: runtimeErrors,
    }),
  );
  return file;
}

function summary(...args: string[]): Promise<{ code: number; lines: string[]; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['scripts/jest-summary.mjs', ...args], (error, stdout, stderr) =>
      resolve({ code: error ? (error.code as number) : 0, lines: stdout.trimEnd().split('\n'), stderr }),
    );
  });
}

describe('the CI test summary (scripts/jest-summary.mjs)', () => {
  test('counts run by run and ends with the plain line `N passed, M failed`; all green exits 0', async () => {
    const { code, lines } = await summary(run('unit', { passed: 3, pending: 1 }), run('prod', { passed: 2 }));
    assert.deepEqual(lines, [
      'unit: 3 passed, 0 failed, 1 skipped',
      'prod: 2 passed, 0 failed, 0 skipped',
      '5 passed, 0 failed',
    ]);
    assert.equal(code, 0);
  });

  test('a run that executed no test fails CI, even when every other run passed', async () => {
    const { code, lines, stderr } = await summary(run('unit', { passed: 5 }), run('faults', { pending: 2 }));
    assert.equal(lines.at(-1), '5 passed, 1 failed');
    assert.match(stderr, /faults executed no test/);
    assert.equal(code, 1);
  });

  test('a run below the floor it is known to hold fails; exactly at it passes', async () => {
    const floors = join(dir, 'floors.json');
    writeFileSync(floors, JSON.stringify({ production: 16 }));
    const at = await summary('--floors', floors, run('production', { passed: 16 }));
    assert.deepEqual(at.lines, [
      'production: 16 passed, 0 failed, 0 skipped (holds at least 16)',
      '16 passed, 0 failed',
    ]);
    assert.equal(at.code, 0);
    const below = await summary('--floors', floors, run('production', { passed: 15 }));
    assert.equal(below.lines.at(-1), '15 passed, 1 failed');
    assert.match(below.stderr, /production executed 15 tests, fewer than the 16 it is known to hold/);
    assert.equal(below.code, 1);
  });

  test('a failed test, a suite that failed to load, or a missing result fails CI', async () => {
    const failing = await summary(run('unit', { passed: 4, failed: 1 }));
    assert.deepEqual([failing.lines.at(-1), failing.code], ['4 passed, 1 failed', 1]);
    const broken = await summary(run('unit', { passed: 4, runtimeErrors: 1 }));
    assert.deepEqual([broken.lines.at(-1), broken.code], ['4 passed, 1 failed', 1]);
    const missing = await summary(run('unit', { passed: 4 }), join(dir, 'absent.json'));
    assert.deepEqual([missing.lines.at(-1), missing.code], ['4 passed, 1 failed', 1]);
    assert.match(missing.stderr, /absent: no Jest result/);
  });

  test('CI passes its floors file, and holds a floor for every run it makes', () => {
    const ci = readFileSync('.ci/run', 'utf8');
    assert.match(ci, /node scripts\/jest-summary\.mjs --floors \.ci\/test-floors\.json "\$results"\/\*\.json/);
    const runs = [...ci.matchAll(/^jest_run (\S+) /gm)].map((m) => m[1]);
    const floors = JSON.parse(readFileSync('.ci/test-floors.json', 'utf8')) as Record<string, number>;
    assert.deepEqual(Object.keys(floors).sort(), [...runs].sort());
  });
});
