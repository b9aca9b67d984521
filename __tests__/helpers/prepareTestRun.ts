import { writeFileSync } from 'node:fs';
import { loadOrCreateSecrets } from '../../src/auth/idp/keys.js';
import { argon2Params, seedDemoUsers } from '../../src/auth/idp/users.js';
import { openDatabase } from '../../src/store/open.js';
import { migrate } from '../../src/store/migrations.js';
import { seed } from '../../src/store/seed.js';
import { testRunAt } from './testRun.js';

/**
 * Once per Jest run (globalSetup.mjs runs this with tsx): the expensive fixtures every test server would otherwise
 * build again — an initialised, migrated and seeded embedded database, and the IdP's signing keys and hashed demo
 * users, written into the run folder given as the only argument.
 */
const run = testRunAt(process.argv[2]!);
const db = await openDatabase({ kind: 'pglite', dataDir: run.templateDb });
try {
  await migrate(db);
  await seed(db);
  await loadOrCreateSecrets(db);
  await seedDemoUsers(db, argon2Params('test'));
  const [row] = await db.query<{ jwks: unknown }>('select jwks from idp_keys where id = 1');
  writeFileSync(run.idpSecretsFile, JSON.stringify(row!.jwks));
} finally {
  await db.close();
}
