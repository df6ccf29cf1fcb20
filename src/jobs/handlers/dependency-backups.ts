import type { OpsResource } from '../../domain/ops-json.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import type { BackupRequest, DependencyBackups } from '../../providers/provider.ts';
import {
  changeBackup,
  completedBeyond,
  deleteBackup,
  findBackup,
  pruneFailedBackups,
  servicesStoppedByOtherRestores,
} from '../../store/repositories/dependency-backups.ts';
import { findEnvironmentById } from '../../store/repositories/environments.ts';
import { listResources } from '../../store/repositories/resources.ts';
import { findServiceById } from '../../store/repositories/services.ts';
import type { DependencyBackupRow, JobRow } from '../../store/schema.ts';
import { TerminalError } from '../errors.ts';
import type { JobHandler } from '../worker.ts';

/** The provider's backups, or a TerminalError (the provider changed since the backup was asked for). */
function backupsOf(deps: Pick<Deps, 'provider'>): DependencyBackups {
  if (!deps.provider.backups) throw new TerminalError('this provider takes no dependency backups');
  return deps.provider.backups;
}

/** What the provider is given for a backup: its dependency as declared, its service and environment. */
async function requestOf(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  backup: DependencyBackupRow,
): Promise<BackupRequest> {
  const { db } = deps.store;
  const service = await findServiceById(db, backup.service_id);
  if (!service) throw new TerminalError('the service is gone');
  const environment = await findEnvironmentById(db, service.environment_id);
  if (!environment) throw new TerminalError('the environment is gone');
  const row = (await listResources(db, service.id)).find(
    (r) => r.kind === backup.kind && r.type === backup.type && r.resource_id === backup.resource_id,
  );
  if (row?.state !== 'available') {
    throw new TerminalError(
      `the dependency ${backup.kind} ${backup.type} ${backup.resource_id} is ${row?.state ?? 'gone'}`,
    );
  }
  const spec = row.spec as { prefix: string; properties: Record<string, unknown> };
  const resource: OpsResource = {
    kind: row.kind,
    type: row.type,
    id: row.resource_id,
    prefix: spec.prefix,
    properties: spec.properties,
    exports: {},
    skip_preview: false,
    preview_only: false,
  };
  return {
    service,
    environment,
    resource,
    backupId: backup.id,
    ...(row.password ? { password: deps.secretBox.open(row.password) } : {}),
  };
}

/** How many completed backups a dependency keeps: its declared `backup_keep`, else the setting. */
function keepOf(deps: Pick<Deps, 'config'>, request: BackupRequest): number {
  const declared = request.resource.properties.backup_keep;
  return typeof declared === 'number' ? declared : deps.config.dependencyBackupKeep;
}

/**
 * Retention after a completed backup: the dependency's completed backups past the newest N go (their
 * file first, then the row: a crash between leaves a row whose file the next round discards again).
 * Only completed backups count, so a failed one never takes a good one's place.
 */
async function applyRetention(deps: Pick<Deps, 'store' | 'provider' | 'config'>, request: BackupRequest) {
  const { db } = deps.store;
  const ref = { kind: request.resource.kind, type: request.resource.type, resource_id: request.resource.id };
  const keep = keepOf(deps, request);
  for (const old of await completedBeyond(db, request.service.id, ref, keep)) {
    await backupsOf(deps).discard(request.environment, old.location);
    await deleteBackup(db, old.id);
  }
  await pruneFailedBackups(db, request.service.id, ref, keep);
}

/** Runs one backup: pending -> running -> completed (or failed, with the reason), then retention. */
export function dependencyBackupHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow, signal, claim) {
      const backup = await findBackup(db, job.subject_id);
      if (!backup || backup.state === 'completed' || backup.state === 'failed') return;
      const request = await requestOf(deps, backup);
      await changeBackup(db, backup.id, { state: 'running' }, { state: ['pending', 'running'] });
      signal.throwIfAborted();
      const written = await backupsOf(deps).backup(request, signal);
      await db.transaction().execute(async (trx) => {
        await changeBackup(trx, backup.id, {
          state: 'completed',
          location: written.location,
          size_bytes: written.sizeBytes,
          error: '',
          completed: true,
        });
        await claim.finish(trx);
      });
      // Retention is best effort: a backup that is complete stays complete if it fails.
      await applyRetention(deps, request).catch((err: unknown) =>
        deps.logger.warn({ err, backup: backup.id }, 'dependency backup retention failed'),
      );
    },
    async fail(job: JobRow, reason, claim) {
      await db.transaction().execute(async (trx) => {
        await changeBackup(
          trx,
          job.subject_id,
          { state: 'failed', error: reason, completed: true },
          { state: ['pending', 'running'] },
        );
        await claim.finish(trx);
      });
      deps.logger.warn({ backup: job.subject_id, reason }, 'dependency backup failed');
    },
    async retrying(job: JobRow, reason) {
      await changeBackup(db, job.subject_id, { error: reason }, { state: ['pending', 'running'] });
    },
  };
}

/**
 * Gives back the services a restore of the backup held stopped when its job gives up (its workers kept
 * dying before the restore could start them again). A service another restore under way stops stays
 * stopped: that one starts it at its end.
 */
async function releaseHeld(deps: Pick<Deps, 'store' | 'provider'>, backupId: string): Promise<void> {
  const { db } = deps.store;
  const backup = await findBackup(db, backupId);
  if (backup?.restore_state !== 'running' || backup.restore_into === 'new') return;
  const stoppedElsewhere = await servicesStoppedByOtherRestores(db, backup.id);
  const held = [];
  for (const id of backup.restore_stopped_services) {
    const service = stoppedElsewhere.has(id) ? undefined : await findServiceById(db, id);
    if (service) held.push(service);
  }
  const owner = await findServiceById(db, backup.service_id);
  const environment = owner && (await findEnvironmentById(db, owner.environment_id));
  if (held.length > 0 && environment) await backupsOf(deps).release(environment, held);
}

/** Runs one restore of a completed backup into its dependency, stopping the services it names. */
export function dependencyRestoreHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow, signal, claim) {
      const backup = await findBackup(db, job.subject_id);
      if (!backup || (backup.restore_state !== 'pending' && backup.restore_state !== 'running')) return;
      const request = await requestOf(deps, backup);
      const stop = [];
      for (const id of backup.restore_stopped_services) {
        const service = await findServiceById(db, id);
        if (service) stop.push(service);
      }
      await changeBackup(db, backup.id, { restore_state: 'running' });
      signal.throwIfAborted();
      const into = backup.restore_into ?? 'same';
      const restored = await backupsOf(deps).restore(
        { ...request, location: backup.location, stop: into === 'same' ? stop : [], into },
        signal,
      );
      await db.transaction().execute(async (trx) => {
        await changeBackup(trx, backup.id, {
          restore_state: 'completed',
          restore_error: '',
          restore_attributes: restored.attributes ?? {},
          restore_completed: true,
        });
        await claim.finish(trx);
      });
    },
    async fail(job: JobRow, reason, claim) {
      // Before the failure is recorded: should the release fail, the job's next run gives up again.
      await releaseHeld(deps, job.subject_id);
      await db.transaction().execute(async (trx) => {
        await changeBackup(
          trx,
          job.subject_id,
          { restore_state: 'failed', restore_error: reason, restore_completed: true },
          { restore_state: ['pending', 'running'] },
        );
        await claim.finish(trx);
      });
      deps.logger.warn({ backup: job.subject_id, reason }, 'dependency restore failed');
    },
    async retrying(job: JobRow, reason) {
      await changeBackup(db, job.subject_id, { restore_error: reason });
    },
  };
}
