import {
  copyFileSync,
  existsSync,
  globSync,
  mkdirSync,
  readFileSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { build } from 'esbuild';
import { loadOrCreateSecrets } from '../../src/auth/idp/keys.js';
import { argon2Params, seedDemoUsers } from '../../src/auth/idp/users.js';
import type { Database } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { seed } from '../../src/store/seed.js';
import { testRunAt } from './testRun.js';

/**
 * Once per Jest run (globalSetup.mjs runs this with tsx): the expensive fixtures every test server would otherwise
 * build again — an initialised, migrated and seeded embedded database, and the IdP's signing keys and hashed demo
 * users, written into the run folder given as the only argument. The database goes there as a tarball of its data
 * directory (PGlite's dumpDataDir), which each test server loads into memory; beside it, the app built for child
 * processes (buildApp).
 */
const run = testRunAt(process.argv[2]!);
const ROOT = path.join(import.meta.dirname, '../..');

/**
 * The app that tests start as a process of its own (helpers/replica.ts, `appProcessArgs` in testRun.ts): src/
 * transpiled file by file to JavaScript with esbuild, as tsx would do it, laid out as the image is (package.json,
 * schema.graphql, src/, and the project's node_modules linked). Started through tsx instead, each child spent about a
 * second more CPU on its resolver and loader hooks (3.5 s against 2.45 s to listening, 2026-11-29).
 */
async function buildApp(): Promise<void> {
  mkdirSync(run.appDir);
  const sources = globSync('src/**/*.ts', { cwd: ROOT }).filter((file) => !file.endsWith('.d.ts'));
  await build({
    entryPoints: sources.map((file) => path.join(ROOT, file)),
    outbase: ROOT,
    outdir: run.appDir,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    logLevel: 'warning',
  });
  for (const file of ['package.json', 'schema.graphql'])
    copyFileSync(path.join(ROOT, file), path.join(run.appDir, file));
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(run.appDir, 'node_modules'), 'dir');
}
// esbuild works in a process of its own meanwhile: the database below keeps this one busy.
const appBuilt = buildApp();

/**
 * Test servers' embedded databases hold a few hundred rows, so they start with a small buffer pool: PostgreSQL zeroes
 * its whole shared memory at every start (128 MB by default, most of an embedded server's start-up CPU), once for
 * each test server. `min_wal_size` lets a checkpoint remove the WAL segments it no longer needs instead of keeping
 * them for reuse, so they stay out of the tarball. The application's own PGlite keeps PGlite's settings.
 */
const TEST_SETTINGS = { shared_buffers: '8MB', max_connections: '5', min_wal_size: '2MB' };

/**
 * PGlite's initdb (seconds of CPU, before any test can start) gives the same empty cluster every time for one PGlite
 * version, so that empty cluster is kept between runs under the OS temp directory, named by the version. Everything
 * of this project's (schema, seed, IdP keys, demo users) is still made afresh for each run.
 */
async function emptyCluster(): Promise<PGlite> {
  const pkg = new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url);
  const { version } = JSON.parse(readFileSync(pkg, 'utf8')) as { version: string };
  const dir = path.join(tmpdir(), 'orders-api-test-cache');
  const cached = path.join(dir, `pglite-${version}-initdb-lean.tar`);
  if (existsSync(cached)) {
    try {
      const pglite = new PGlite({ loadDataDir: new Blob([readFileSync(cached)]) });
      await pglite.waitReady;
      return pglite;
    } catch {
      // Unreadable (cut short, another version's layout): built again below, and replaced.
    }
  }
  // In memory: initdb on disk spends much of its time writing files that only end up in a tarball.
  // WAL in 1 MB segments instead of 16 MB: the segment is part of the tarball every test server loads.
  const pglite = new PGlite({ initDbStartParams: ['--wal-segsize=1'] });
  await pglite.waitReady;
  // One statement each: ALTER SYSTEM refuses to run in the implicit transaction of a multi-statement string.
  for (const [name, value] of Object.entries(TEST_SETTINGS)) await pglite.exec(`alter system set ${name} = '${value}'`);
  // Nothing here creates databases, so the two templates go: a third of the files each test server would load.
  await pglite.exec(`update pg_database set datistemplate = false where datname in ('template0', 'template1')`);
  await pglite.exec('drop database template0');
  await pglite.exec('drop database template1');
  await pglite.exec('checkpoint');
  const tarball = await pglite.dumpDataDir('none');
  mkdirSync(dir, { recursive: true });
  const partial = `${cached}.${process.pid}`;
  writeFileSync(partial, Buffer.from(await tarball.arrayBuffer()));
  renameSync(partial, cached);
  return pglite;
}

/**
 * A checkpoint keeps the WAL segments it no longer needs as the next ones to write, by renaming them: after the
 * migrations and seed, most of the template's WAL. Nothing in them is read, yet every test server would unpack them
 * into memory, so they are removed before the dump, and PostgreSQL creates each one when it first writes
 * to it. The segment being written and any before it stay. (WAL file names are fixed-width hexadecimal: their text
 * order is their numeric order.)
 */
async function dropFutureWalSegments(pglite: PGlite): Promise<void> {
  const { rows } = await pglite.query<{ dir: string; current: string }>(
    `select current_setting('data_directory') || '/pg_wal' as dir, pg_walfile_name(pg_current_wal_insert_lsn()) as current`,
  );
  const { dir, current } = rows[0]!;
  const { FS } = pglite.Module;
  for (const name of FS.readdir(dir)) {
    if (/^[0-9A-F]{24}$/.test(name) && name > current) FS.unlink(`${dir}/${name}`);
  }
}

const pglite = await emptyCluster();
const db: Database = {
  kind: 'pglite',
  identity: 'template',
  query: async (sql, params) => (await pglite.query<never>(sql, params as unknown[] | undefined)).rows,
  queryResult: (sql, params) => pglite.query<unknown[]>(sql, params as unknown[] | undefined, { rowMode: 'array' }),
  transaction: (fn) =>
    pglite.transaction((tx) =>
      fn({
        query: async (sql, params) => (await tx.query<never>(sql, params as unknown[] | undefined)).rows,
        queryResult: (sql, params) => tx.query<unknown[]>(sql, params as unknown[] | undefined, { rowMode: 'array' }),
      }),
    ),
  ping: async () => void (await pglite.query('select 1')),
  close: () => pglite.close(),
};
try {
  await migrate(db);
  await seed(db);
  await loadOrCreateSecrets(db);
  await seedDemoUsers(db, argon2Params('test'));
  const [row] = await db.query<{ jwks: unknown }>('select jwks from idp_keys where id = 1');
  writeFileSync(run.idpSecretsFile, JSON.stringify(row!.jwks));
  // Each test server then starts from this checkpoint instead of replaying the migrations' and seed's WAL.
  await pglite.exec('checkpoint');
  await dropFutureWalSegments(pglite);
  const tarball = await pglite.dumpDataDir('none');
  writeFileSync(run.templateTar, Buffer.from(await tarball.arrayBuffer()));
} finally {
  await db.close();
}
await appBuilt;
