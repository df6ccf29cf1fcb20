import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import packageJson from '../../../package.json' with { type: 'json' };
import { backupLines } from '../../store/backup.ts';
import { writeBackupFile } from '../../store/backup-file.ts';
import type { Store } from '../../store/database.ts';
import { notADirectory } from '../directories.ts';
import type { Deps } from './context.ts';

/** Backups of Berth's own state (docs/operations.md, "Backups"); the restore is src/restore.ts. */

export const BERTH_VERSION: string = packageJson.version;

/** A backup's file name: names sort by time, which retention relies on. */
export const backupFileName = (at: Date) =>
  `berth-backup-${at.toISOString().replace(/[:.]/g, '-')}.ndjson.gz`;
export const BACKUP_FILE = /^berth-backup-.*\.ndjson\.gz$/;

/** Writes a consistent snapshot of the store into `file`: complete, or not there at all. */
export function takeBackup(store: Store, file: string, now = new Date()): Promise<void> {
  return writeBackupFile(file, backupLines(store.db, { version: BERTH_VERSION, database: store.kind, now }));
}

/**
 * A backup written to a temporary file for GET /admin/v1/backup to send. Spooled rather than streamed
 * to the client: the snapshot's transaction lasts as long as the database takes to read, not as long as
 * the client takes to download (on the embedded database, requests wait for it meanwhile).
 */
export async function spoolBackup(deps: Pick<Deps, 'store'>): Promise<{
  file: string;
  name: string;
  remove(): Promise<void>;
}> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'berth-backup-'));
  const now = new Date();
  const name = backupFileName(now);
  const file = path.join(dir, name);
  const remove = () => fs.promises.rm(dir, { recursive: true, force: true });
  try {
    await takeBackup(deps.store, file, now);
  } catch (error) {
    await remove();
    throw error;
  }
  return { file, name, remove };
}

/**
 * Claims one tick of BERTH_BACKUP_SCHEDULE for this process: several processes on one database share
 * the schedule, and the first to record the tick takes that backup; the others see it taken.
 */
export async function claimScheduledBackup(store: Store, tick: Date): Promise<boolean> {
  const at = tick.toISOString();
  const { rows } = await sql`
    INSERT INTO settings (key, value) VALUES ('backup_scheduled_at', ${at})
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value WHERE settings.value < EXCLUDED.value
    RETURNING key`.execute(store.db);
  return rows.length === 1;
}

/**
 * Makes BERTH_BACKUP_DIR if missing (0700). A file in its way is named as such: mkdir's own EEXIST or
 * ENOTDIR would reach the log and every account's backup_failed alert as the reason.
 */
async function makeBackupDir(dir: string): Promise<void> {
  const reason = notADirectory('BERTH_BACKUP_DIR', dir);
  if (reason) throw new Error(reason);
  await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
}

/**
 * One scheduled backup into `dir`, then retention: the backups beyond the newest `keep` are removed, and
 * only once the new one is complete. A backup that fails (the directory missing or unwritable, the disk
 * full) throws its reason and removes nothing.
 */
export async function scheduledBackup(
  store: Store,
  dir: string,
  keep: number,
  now = new Date(),
): Promise<{ file: string; removed: string[] }> {
  await makeBackupDir(dir);
  const file = path.join(dir, backupFileName(now));
  await takeBackup(store, file, now);
  const backups = (await fs.promises.readdir(dir)).filter((name) => BACKUP_FILE.test(name)).sort();
  const removed = backups.slice(0, Math.max(0, backups.length - keep));
  for (const name of removed) await fs.promises.rm(path.join(dir, name), { force: true });
  return { file, removed };
}
