import { type Migration, Migrator } from 'kysely/migration';
import type { Db } from '../store/database.ts';

/**
 * A driver's own migrations, kept apart from Berth's (own history table, own lock), so that a driver
 * owns its tables: adding one changes nothing outside its folder.
 */
export async function migrateDriver(
  db: Db,
  driver: string,
  migrations: Record<string, Migration>,
): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableName: `${driver}_migrations`,
    migrationLockTableName: `${driver}_migrations_lock`,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`The ${driver} provider's migration ${failed} failed: ${(error as Error).message}`);
  }
}
