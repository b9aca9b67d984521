// Jest globalSetup: one folder per run under the OS temp directory, holding the fixtures prepareTestRun.ts builds
// once for every worker. Workers find it through ORDERS_TEST_RUN_DIR (see testRun.ts). Plain JavaScript: Jest loads
// this file outside its ESM module system, so the TypeScript runs in a tsx child process.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export default function globalSetup() {
  const dir = mkdtempSync(path.join(tmpdir(), 'orders-api-tests-'));
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  execFileSync(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'prepareTestRun.ts'), dir], {
    env,
    stdio: 'inherit',
  });
  process.env.ORDERS_TEST_RUN_DIR = dir;
}
