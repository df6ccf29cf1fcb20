import { Cron } from 'croner';
import { scheduledS3Backup } from '../domain/usecases/backup-s3.ts';
import { claimScheduledBackup, scheduledBackup } from '../domain/usecases/backups.ts';
import type { Deps } from '../domain/usecases/context.ts';

/**
 * BERTH_BACKUP_SCHEDULE: every process that runs workers keeps the schedule; at each tick the one that
 * claims it (claimScheduledBackup) takes the backup into BERTH_BACKUP_DIR (or BERTH_BACKUP_S3_URL's bucket)
 * and applies BERTH_BACKUP_KEEP.
 * A failed backup is logged at error level with its reason and counted (`berth_backups_total`); the
 * metrics and docs/operations.md say what to alert on.
 */
export function startBackupSchedule(
  deps: Pick<Deps, 'store' | 'config' | 'logger' | 'metrics'>,
): { stop(): Promise<void> } | null {
  const { backupSchedule, backupDir, backupKeep, backupS3 } = deps.config;
  const target = backupS3 ? `s3://${backupS3.bucket}/${backupS3.prefix}` : backupDir;
  if (!backupSchedule) return null;
  const log = deps.logger.child({ component: 'backups' });
  let round: Promise<void> = Promise.resolve();
  const tick = async (self: Cron) => {
    const at = self.currentRun() ?? new Date();
    try {
      if (!(await claimScheduledBackup(deps.store, at))) return;
      const { file, removed } = backupS3
        ? await scheduledS3Backup(deps.store, backupS3, backupKeep, at)
        : await scheduledBackup(deps.store, backupDir, backupKeep, at);
      log.info({ file, removed }, 'scheduled backup written');
      deps.metrics.backups.inc({ outcome: 'written' });
      deps.metrics.backupWritten.set(Date.now() / 1000);
    } catch (err) {
      deps.metrics.backups.inc({ outcome: 'failed' });
      log.error({ err, target }, `scheduled backup failed: ${(err as Error).message}`);
    }
  };
  // protect: a tick that comes while the last backup is still being written is skipped.
  const cron = new Cron(backupSchedule, { protect: true, timezone: 'UTC', unref: true }, (self: Cron) => {
    round = tick(self);
    return round;
  });
  log.info(
    { schedule: backupSchedule, dir: backupDir, keep: backupKeep, next: cron.nextRun() },
    'backups scheduled',
  );
  return {
    stop: async () => {
      cron.stop();
      await round;
    },
  };
}
