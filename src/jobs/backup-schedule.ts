import { Cron } from 'croner';
import { scheduledS3Backup } from '../domain/usecases/backup-s3.ts';
import { claimScheduledBackup, scheduledBackup } from '../domain/usecases/backups.ts';
import type { Deps } from '../domain/usecases/context.ts';
import { openBackupAlert, resolveBackupAlert } from '../store/repositories/backup-alert.ts';

/**
 * BERTH_BACKUP_SCHEDULE: every process that runs workers keeps the schedule; at each tick the one that
 * claims it (claimScheduledBackup) takes the backup into BERTH_BACKUP_DIR (or BERTH_BACKUP_S3_URL's bucket)
 * and applies BERTH_BACKUP_KEEP.
 * A failed backup is logged at error level with its reason, counted (`berth_backups_total`) and opens
 * the backup_failed alert (an event of every account: store/repositories/backup-alert.ts); the next
 * good backup resolves it. docs/operations.md says what to alert on.
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
      await resolveBackupAlert(deps.store.db, new Date()).catch((alertErr: unknown) =>
        log.warn({ err: alertErr }, 'resolving the backup_failed alert failed'),
      );
    } catch (err) {
      deps.metrics.backups.inc({ outcome: 'failed' });
      const reason = (err as Error).message;
      log.error({ err, target }, `scheduled backup failed: ${reason}`);
      await openBackupAlert(deps.store.db, reason, new Date()).catch((alertErr: unknown) =>
        // The database itself may be what failed the backup: the log line above stands alone then.
        log.warn({ err: alertErr }, 'opening the backup_failed alert failed'),
      );
    }
  };
  // protect: a tick that comes while the last backup is still being written is skipped.
  const cron = new Cron(backupSchedule, { protect: true, timezone: 'UTC', unref: true }, (self: Cron) => {
    round = tick(self);
    return round;
  });
  log.info({ schedule: backupSchedule, target, keep: backupKeep, next: cron.nextRun() }, 'backups scheduled');
  return {
    stop: async () => {
      cron.stop();
      await round;
    },
  };
}
