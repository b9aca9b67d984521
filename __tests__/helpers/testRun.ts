import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Database } from '../../src/store/db.js';
import { openPglite } from '../../src/store/pglite.js';

/**
 * What Jest's globalSetup (globalSetup.mjs → prepareTestRun.ts) prepares once per run, for every worker: a folder of
 * its own under the OS temp directory holding an embedded database that is already initialised, migrated and seeded
 * (with the IdP's signing keys and demo users), as a tarball of its data directory, those IdP secrets for servers on
 * PostgreSQL, and the app as tests start it in a process of its own.
 */
export const RUN_DIR_ENV = 'ORDERS_TEST_RUN_DIR';

export interface TestRun {
  readonly dir: string;
  /** PGlite's dumpDataDir of the template database (an uncompressed tar of its data directory). */
  readonly templateTar: string;
  readonly idpSecretsFile: string;
  /** src/ transpiled to JavaScript, laid out as the image is (package.json, schema.graphql, src/, node_modules). */
  readonly appDir: string;
}

export function testRunAt(dir: string): TestRun {
  return {
    dir,
    templateTar: path.join(dir, 'pglite-template.tar'),
    idpSecretsFile: path.join(dir, 'idp-secrets.json'),
    appDir: path.join(dir, 'app'),
  };
}

/** The current run, when a globalSetup prepared one (a one-off script has none). */
export function currentTestRun(): TestRun | undefined {
  const dir = process.env[RUN_DIR_ENV];
  return dir ? testRunAt(dir) : undefined;
}

/**
 * `node`'s arguments, from the project root, to start the app as a process of its own: the run's JavaScript build of
 * src/ (prepareTestRun.ts), or src/main.ts through tsx when no globalSetup prepared a run.
 */
export function appProcessArgs(): string[] {
  const run = currentTestRun();
  return run ? [path.join(run.appDir, 'src', 'main.js')] : ['--import', 'tsx', 'src/main.ts'];
}

let template: Blob | undefined;

/**
 * An in-memory copy of the run's template database: PGlite loads the tarball into its memory file system, so
 * nothing is copied on disk and nothing is left to delete (about half the cost of a copied data directory).
 */
export async function openTemplateDb(run: TestRun): Promise<Database> {
  template ??= new Blob([readFileSync(run.templateTar)]);
  return openPglite('memory', { loadDataDir: template });
}

/** A private data directory holding the template, for a server in a process of its own (DATA_DIR). */
export function copyTemplateDb(run: TestRun): { dataDir: string; remove: () => void } {
  const dataDir = mkdtempSync(path.join(run.dir, 'db-'));
  // tar's notice about the tarball's absolute member names goes nowhere; a failure still throws with its stderr.
  execFileSync('tar', ['-xf', run.templateTar, '-C', dataDir], { stdio: ['ignore', 'ignore', 'pipe'] });
  return { dataDir, remove: () => rmSync(dataDir, { recursive: true, force: true }) };
}

export function idpSecrets(run: TestRun): string {
  return readFileSync(run.idpSecretsFile, 'utf8');
}

/** A fresh folder for a test's artifacts (screenshots), kept after the run: OS temp dir/orders-api-test-artifacts/. */
export function artifactDir(name: string): string {
  const base = path.join(tmpdir(), 'orders-api-test-artifacts');
  mkdirSync(base, { recursive: true });
  return mkdtempSync(path.join(base, `${name}-`));
}

/**
 * DATA_DIR for an embedded database of a test's own, for a server in a child process: a copy of the run's template
 * (already migrated and seeded, with the run's IdP keys and demo users), or `memory` when no globalSetup prepared a
 * run. `remove` deletes the copy; call it once the process using it has exited.
 */
export function testDataDir(): { dataDir: string; remove: () => void } {
  const run = currentTestRun();
  return run ? copyTemplateDb(run) : { dataDir: 'memory', remove: () => undefined };
}

/**
 * An embedded database of a test's own in this process: an in-memory copy of the run's template, or a fresh
 * in-memory database when no globalSetup prepared a run.
 */
export async function testDatabase(): Promise<Database> {
  const run = currentTestRun();
  return run ? openTemplateDb(run) : openPglite('memory');
}
