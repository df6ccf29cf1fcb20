import { type Migration, Migrator } from 'kysely/migration';
import type { Db } from '../store/database.ts';

/**
 * A driver's own migrations, kept apart from Berth's (own history table, own lock), so that a driver
 * owns its tables: adding one changes nothing outside its folder.
 *
 * Unordered: a driver's first tables were once created by Berth's own migrations, and the migration
 * that now creates them (`0000-...`, IF NOT EXISTS) came after later driver migrations had already run
 * on existing databases. There it runs last and finds its tables in place.
 */
export async function migrateDriver(
  db: Db,
  driver: string,
  migrations: Record<string, Migration>,
  /** Only these of them (a restore rebuilds a backup's schema first, then runs the rest). */
  only?: readonly string[],
): Promise<void> {
  const chosen = only
    ? Object.fromEntries(Object.entries(migrations).filter(([name]) => only.includes(name)))
    : migrations;
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => chosen },
    migrationTableName: `${driver}_migrations`,
    migrationLockTableName: `${driver}_migrations_lock`,
    allowUnorderedMigrations: true,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`The ${driver} provider's migration ${failed} failed: ${(error as Error).message}`);
  }
}
