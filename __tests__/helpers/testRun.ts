import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * What Jest's globalSetup (globalSetup.mjs → prepareTestRun.ts) prepares once per run, for every worker: a folder of its own under the OS temp
 * directory holding an embedded database that is already initialised, migrated and seeded (with the IdP's
 * signing keys and demo users), and those IdP secrets for servers on PostgreSQL.
 */
export const RUN_DIR_ENV = 'ORDERS_TEST_RUN_DIR';

export interface TestRun {
  readonly dir: string;
  readonly templateDb: string;
  readonly idpSecretsFile: string;
}

export function testRunAt(dir: string): TestRun {
  return { dir, templateDb: path.join(dir, 'pglite-template'), idpSecretsFile: path.join(dir, 'idp-secrets.json') };
}

/** The current run, when a globalSetup prepared one (plain `node --test` or a one-off script has none). */
export function currentTestRun(): TestRun | undefined {
  const dir = process.env[RUN_DIR_ENV];
  return dir ? testRunAt(dir) : undefined;
}

/** A private copy of the template database; opening it skips PGlite's initdb, the slow part of a fresh one. */
export function copyTemplateDb(run: TestRun): { dataDir: string; remove: () => void } {
  const dataDir = mkdtempSync(path.join(run.dir, 'db-'));
  cpSync(run.templateDb, dataDir, { recursive: true });
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
 * DATA_DIR for an embedded database of a test's own: a copy of the run's template (already migrated and seeded,
 * with the run's IdP keys and demo users), or `memory` when no globalSetup prepared a run. `remove` deletes the
 * copy; call it once the database is closed (or the process using it has exited).
 */
export function testDataDir(): { dataDir: string; remove: () => void } {
  const run = currentTestRun();
  return run ? copyTemplateDb(run) : { dataDir: 'memory', remove: () => undefined };
}
