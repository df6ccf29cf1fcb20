import fs from 'node:fs';
import path from 'node:path';
import type { Config } from './config.ts';
import { BERTH_VERSION } from './domain/usecases/backups.ts';
import { migrateDriver } from './providers/migrations.ts';
import { driverMigrations } from './providers/registry.ts';
import { backupLoader, isEmptyDatabase, migrationHistories } from './store/backup.ts';
import { BackupError, type BackupManifest, readBackupFile } from './store/backup-file.ts';
import { openStore, type Store } from './store/database.ts';
import { readSnapshotMeta } from './store/embedded-snapshot.ts';
import { KNOWN_MIGRATIONS, migrateToLatest } from './store/migrate.ts';
import { keyFileOf, loadMasterKeys, SecretBox } from './store/secret-box.ts';

/**
 * `berth admin restore` (docs/operations.md, "Restoring"): what ties a backup file (store/backup-file.ts)
 * and its rows (store/backup.ts) to Berth's migrations, its drivers' and its master keys. It opens the
 * database itself: the target is a new one no server runs on.
 */

export interface RestoreSummary {
  file: string;
  created_at: string;
  berth_version: string;
  migration: string;
  rows: number;
}

/**
 * Restores `file` onto the empty database `config` names. Every check comes before anything is written:
 * the checksum, a schema no newer than this build's, the master keys, an empty target. The schema is
 * then made as the backup's (its own migrations), the rows loaded in one transaction, and the migrations
 * it had not run yet run last, as in any upgrade.
 */
export async function restoreBackup(config: Config, file: string): Promise<RestoreSummary> {
  const { manifest, trailer } = await readBackupFile(file);
  const drivers = await driverMigrations();
  refuseNewerSchema(file, manifest, drivers);
  refuseWrongKey(file, manifest, config);
  const berth = manifest.migrations.berth ?? [];
  // A new embedded directory comes from a snapshot already migrated: it must not be ahead of the backup.
  const snapshot = readSnapshotMeta()?.migrations ?? [];
  const store = await openStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    migrate: false,
    initdb: snapshot.some((name) => !berth.includes(name)),
  });
  try {
    await refuseNonEmpty(store, manifest, config);
    await migrateToLatest(store.db, berth);
    for (const [driver, names] of Object.entries(manifest.migrations)) {
      if (driver !== 'berth') await migrateDriver(store.db, driver, drivers[driver] ?? {}, names);
    }
    await store.db.transaction().execute(async (trx) => {
      const loader = await backupLoader(trx);
      // Read (and checked) again: a file changed since the first read is refused, and nothing is kept.
      await readBackupFile(file, (line) => loader.line(line));
      await loader.finish();
    });
    await migrateToLatest(store.db);
    for (const driver of Object.keys(manifest.migrations)) {
      const migrations = drivers[driver];
      if (driver !== 'berth' && migrations) await migrateDriver(store.db, driver, migrations);
    }
  } finally {
    await store.close();
  }
  return {
    file,
    created_at: manifest.created_at,
    berth_version: manifest.berth_version,
    migration: manifest.migration,
    rows: Object.values(trailer.tables).reduce((a, b) => a + b, 0),
  };
}

function refuseNewerSchema(
  file: string,
  manifest: BackupManifest,
  drivers: Record<string, Record<string, unknown>>,
): void {
  for (const [history, names] of Object.entries(manifest.migrations)) {
    const known = history === 'berth' ? KNOWN_MIGRATIONS : Object.keys(drivers[history] ?? {});
    const unknown = names.filter((name) => !known.includes(name));
    if (unknown.length > 0) {
      throw new BackupError(
        `${file} comes from a newer Berth (${manifest.berth_version}, migration level ${manifest.migration}): ` +
          `its database ran ${history === 'berth' ? '' : `the ${history} driver's `}migration ${unknown.join(', ')}, ` +
          `which this Berth (${BERTH_VERSION}) does not know. Restore it with Berth ${manifest.berth_version} or later`,
      );
    }
  }
}

/** The keys the restored Berth will run with must open what the backup sealed; checked by key id. */
function refuseWrongKey(file: string, manifest: BackupManifest, config: Config): void {
  const keyFile = keyFileOf(config.dataDir);
  if (!config.masterKey && !fs.existsSync(keyFile)) {
    throw new BackupError(
      `no master key: ${file}'s secrets are sealed with the master key ${manifest.master_key_ids.join(', ')}. ` +
        `Set BERTH_MASTER_KEY to it, or copy the master.key file it was generated into to ${keyFile}; nothing was written`,
    );
  }
  const box = new SecretBox(loadMasterKeys(config.masterKey, config.dataDir));
  const missing = manifest.master_key_ids.filter((id) => !box.hasKey(id));
  if (missing.length > 0) {
    const source = config.masterKey ? 'BERTH_MASTER_KEY' : keyFile;
    throw new BackupError(
      `wrong master key: ${file}'s secrets are sealed with the master key ${missing.join(', ')}, and ${source} ` +
        `holds ${box.ids().join(', ')}. Set BERTH_MASTER_KEY to the key the backed-up Berth ran with (kept apart ` +
        'from its backups, docs/operations.md); nothing was written',
    );
  }
}

async function refuseNonEmpty(store: Store, manifest: BackupManifest, config: Config): Promise<void> {
  const target =
    store.kind === 'embedded'
      ? `the data directory ${path.resolve(config.dataDir)} (BERTH_DATA_DIR)`
      : 'the database BERTH_DATABASE_URL names';
  if (!(await isEmptyDatabase(store.db))) {
    throw new BackupError(`${target} is not empty: restore onto a new, empty one; nothing was written`);
  }
  for (const [history, names] of Object.entries(await migrationHistories(store.db))) {
    const ahead = names.filter((name) => !(manifest.migrations[history] ?? []).includes(name));
    if (ahead.length > 0) {
      throw new BackupError(
        `${target} already ran migrations the backup had not (${ahead.join(', ')}): restore onto a new, empty one; nothing was written`,
      );
    }
  }
}
