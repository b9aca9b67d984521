import { writeFileSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
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
 * directory (PGlite's dumpDataDir), which each test server loads into memory.
 */
const run = testRunAt(process.argv[2]!);
// In memory: initdb on disk spends much of its time writing files that only end up in the tarball.
const pglite = new PGlite();
const db: Database = {
  kind: 'pglite',
  identity: 'template',
  query: async (sql, params) => (await pglite.query<never>(sql, params as unknown[] | undefined)).rows,
  transaction: (fn) =>
    pglite.transaction((tx) =>
      fn({ query: async (sql, params) => (await tx.query<never>(sql, params as unknown[] | undefined)).rows }),
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
  const tarball = await pglite.dumpDataDir('none');
  writeFileSync(run.templateTar, Buffer.from(await tarball.arrayBuffer()));
} finally {
  await db.close();
}
