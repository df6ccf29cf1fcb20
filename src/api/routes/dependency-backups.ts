import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import {
  createDependencyBackup,
  listDependencyBackups,
  restoreDependencyBackup,
} from '../../domain/usecases/dependency-backups.ts';
import type { DependencyBackupRow } from '../../store/schema.ts';
import { actorOf } from '../plugins/auth.ts';
import { dependencyBackupOf, dependencyOf, serviceOf } from '../plugins/scope.ts';
import { AUTH_ERRORS, CLOSED, Envelope, errorResponses } from '../schemas/common.ts';
import {
  DependencyBackupData,
  DependencyBackupItemParams,
  DependencyBackupParams,
  DependencyBackupsData,
  RestoreBody,
} from '../schemas/dependency-backups.ts';
import { success } from '../views.ts';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function dependencyBackupView(b: DependencyBackupRow) {
  return {
    id: b.id,
    state: b.state,
    trigger: b.trigger,
    size_bytes: b.size_bytes === null ? null : Number(b.size_bytes),
    created_at: b.created_at.toISOString(),
    completed_at: iso(b.completed_at),
    error: b.error,
    restore:
      b.restore_state && b.restore_requested_at
        ? {
            state: b.restore_state,
            into: b.restore_into ?? 'same',
            attributes: b.restore_attributes,
            stopped_services: b.restore_stopped_services,
            error: b.restore_error,
            requested_at: b.restore_requested_at.toISOString(),
            completed_at: iso(b.restore_completed_at),
          }
        : null,
  };
}

const BACKUPS = '/environments/:envId/services/:serviceId/dependencies/:dependencyId/backups';

export const dependencyBackupRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    BACKUPS,
    {
      config: { role: 'viewer' },
      schema: {
        summary: "A dependency's backups",
        description:
          'The logical backups of one ops.json database or cache (rds instances, elasticache clusters), newest ' +
          'first: scheduled ones (BERTH_DEPENDENCY_BACKUP_INTERVAL_HOURS) and those asked for, each with its ' +
          'state, size and latest restore. Retention keeps the newest completed ones; docs/operations.md.',
        params: DependencyBackupParams,
        response: { 200: Envelope(DependencyBackupsData), ...errorResponses(...AUTH_ERRORS, 409) },
      },
    },
    async (request) => {
      const rows = await listDependencyBackups(deps, dependencyOf(request));
      return success({ backups: rows.map(dependencyBackupView) });
    },
  );

  app.post(
    BACKUPS,
    {
      config: { role: 'developer' },
      schema: {
        summary: 'Back up a dependency now',
        description:
          'A `pending` backup that a worker takes (asynchronous, like a deployment: poll the list or follow ' +
          '`dependency_backup.*` events). 409 for a dependency that is not available yet or has no backups ' +
          '(buckets, topics, queues), or on a provider that takes none.',
        params: DependencyBackupParams,
        body: Type.Object({}, CLOSED),
        response: { 200: Envelope(DependencyBackupData), ...errorResponses(...AUTH_ERRORS, 409, 422) },
      },
    },
    async (request) => {
      const backup = await createDependencyBackup(
        deps,
        actorOf(request),
        serviceOf(request),
        dependencyOf(request),
      );
      return success({ backup: dependencyBackupView(backup) });
    },
  );

  app.post(
    `${BACKUPS}/:backupId/restore`,
    {
      config: { role: 'developer' },
      schema: {
        summary: 'Restore a dependency from a backup',
        description:
          "Replaces the dependency's data with a completed backup's, as a job (the backup's `restore` shows its " +
          'progress). A dependency its service is using needs `"force": true`, else 409: the service is ' +
          'stopped for the restore and started again after it, and `restore.stopped_services` says so. 409 too ' +
          'for a backup that is not completed or is being restored.',
        params: DependencyBackupItemParams,
        body: RestoreBody,
        response: { 200: Envelope(DependencyBackupData), ...errorResponses(...AUTH_ERRORS, 409, 422) },
      },
    },
    async (request) => {
      const backup = await restoreDependencyBackup(
        deps,
        actorOf(request),
        serviceOf(request),
        dependencyOf(request),
        dependencyBackupOf(request),
        request.body,
      );
      return success({ backup: dependencyBackupView(backup) });
    },
  );
};
