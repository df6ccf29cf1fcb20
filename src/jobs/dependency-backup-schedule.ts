import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Deps } from '../domain/usecases/context.ts';
import { BACKUP_KINDS, enqueueBackup } from '../domain/usecases/dependency-backups.ts';
import { dueForBackup, insertBackup } from '../store/repositories/dependency-backups.ts';
import { repeatEvery } from './every.ts';

/** How often the schedule looks for dependencies due a backup. */
const LOOK_EVERY_MS = 60_000;

/**
 * Schedules a backup of every dependency whose last scheduled one is older than the interval: a
 * `scheduled` backup row and its job, in one transaction under an advisory lock, so that of several
 * processes looking at once one schedules each backup and the job queue gives it to one worker.
 * Returns how many it scheduled.
 */
export async function scheduleDependencyBackups(
  deps: Pick<Deps, 'store' | 'config'>,
  intervalMs: number,
): Promise<number> {
  return deps.store.db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(1703, 0)`.execute(trx);
    const due = await dueForBackup(trx, intervalMs, BACKUP_KINDS);
    for (const dependency of due) {
      const backup = await insertBackup(trx, {
        id: randomUUID(),
        serviceId: dependency.service_id,
        ref: dependency,
        trigger: 'scheduled',
      });
      await enqueueBackup(trx, backup, dependency.account_id);
    }
    return due.length;
  });
}

/** Runs the schedule beside the workers; off (null) when BERTH_DEPENDENCY_BACKUP_INTERVAL_HOURS is 0. */
export function startDependencyBackupSchedule(
  deps: Pick<Deps, 'store' | 'config' | 'logger'>,
  everyMs = LOOK_EVERY_MS,
): { stop(): Promise<void> } | null {
  const hours = deps.config.dependencyBackupIntervalHours;
  if (hours === 0) return null;
  const log = deps.logger.child({ component: 'dependency-backups' });
  return repeatEvery(
    everyMs,
    async () => {
      const scheduled = await scheduleDependencyBackups(deps, hours * 3_600_000);
      if (scheduled > 0) log.info({ scheduled }, 'dependency backups scheduled');
    },
    (err) => log.warn({ err }, 'scheduling dependency backups failed'),
  );
}
