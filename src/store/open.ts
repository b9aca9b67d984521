import type { DatabaseConfig } from '../config/index.js';
import type { Database } from './db.js';

/** Opens the configured database; each adapter is loaded only when used. */
export async function openDatabase(config: DatabaseConfig): Promise<Database> {
  if (config.kind === 'postgres') {
    const { openPostgres } = await import('./postgres.js');
    return openPostgres(config.url, config.schema);
  }
  const { openPglite } = await import('./pglite.js');
  return openPglite(config.dataDir);
}
