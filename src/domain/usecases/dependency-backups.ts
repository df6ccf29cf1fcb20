import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import {
  changeBackup,
  findBackup,
  insertBackup,
  listBackups,
} from '../../store/repositories/dependency-backups.ts';
import { enqueue } from '../../store/repositories/jobs.ts';
import { listResources } from '../../store/repositories/resources.ts';
import type { DependencyBackupRow, ServiceResourceRow, ServiceRow } from '../../store/schema.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { assertNotDeleting } from './service-guards.ts';

/** The dependencies that have dump tools: databases and caches. Buckets, topics and queues have none. */
export const BACKUP_KINDS = ['rds.instances', 'elasticache.clusters'] as const;

const qualified = (r: Pick<ServiceResourceRow, 'kind' | 'type' | 'resource_id'>) =>
  `${r.kind}.${r.type}.${r.resource_id}`;

/**
 * The dependency a path names: its ops.json id, or `kind.type.id` where two types share the id (ids are
 * unique per type only). Not one of the service's: 404.
 */
export async function findDependency(
  db: Db,
  service: ServiceRow,
  dependencyId: string,
): Promise<ServiceResourceRow> {
  const rows = await listResources(db, service.id);
  const exact = rows.filter((r) => qualified(r) === dependencyId);
  const matches = exact.length > 0 ? exact : rows.filter((r) => r.resource_id === dependencyId);
  const [only, ...others] = matches;
  if (!only) throw new NotFoundError('Dependency');
  if (others.length > 0) {
    throw new ConflictError(
      `Several dependencies of this service have the id ${dependencyId}: name one as ${matches.map(qualified).join(' or ')}`,
    );
  }
  return only;
}

/** A backup of `dependency` by its id; another dependency's is not found either. */
export async function findDependencyBackup(
  db: Db,
  dependency: ServiceResourceRow,
  backupId: string,
): Promise<DependencyBackupRow> {
  const backup = await findBackup(db, backupId);
  if (!backup || backup.service_id !== dependency.service_id || qualified(backup) !== qualified(dependency)) {
    throw new NotFoundError('Backup');
  }
  return backup;
}

export function listDependencyBackups(
  deps: Pick<Deps, 'store'>,
  dependency: ServiceResourceRow,
): Promise<DependencyBackupRow[]> {
  return listBackups(deps.store.db, dependency.service_id, dependency);
}

/** Why this dependency cannot be backed up here, or null. */
function backupRefusal(
  deps: Pick<Deps, 'provider' | 'config'>,
  dependency: ServiceResourceRow,
): string | null {
  if (!(BACKUP_KINDS as readonly string[]).includes(`${dependency.kind}.${dependency.type}`)) {
    return `${dependency.kind} ${dependency.type} have no backups: only rds instances and elasticache clusters do`;
  }
  if (!deps.provider.backups) {
    return `the ${deps.config.provider ?? 'sim'} provider takes no dependency backups`;
  }
  return null;
}

/** Takes a backup now: a `pending` backup and its job, which a worker runs (asynchronous, like a deployment). */
export async function createDependencyBackup(
  deps: Pick<Deps, 'store' | 'provider' | 'config'>,
  actor: Actor,
  service: ServiceRow,
  dependency: ServiceResourceRow,
): Promise<DependencyBackupRow> {
  assertNotDeleting(service);
  const refusal = backupRefusal(deps, dependency);
  if (refusal) throw new ConflictError(refusal);
  if (dependency.state !== 'available') {
    throw new ConflictError(
      `The dependency ${qualified(dependency)} is ${dependency.state}: it can be backed up once it is available`,
    );
  }
  return deps.store.db.transaction().execute(async (trx) => {
    const backup = await insertBackup(trx, {
      id: randomUUID(),
      serviceId: service.id,
      ref: dependency,
      trigger: 'manual',
    });
    await enqueueBackup(trx, backup, service.account_id);
    await recordAudit(trx, actor, 'dependency_backup.create', {
      id: backup.id,
      environmentId: service.environment_id,
    });
    return backup;
  });
}

export function enqueueBackup(
  db: Deps['store']['db'],
  backup: Pick<DependencyBackupRow, 'id' | 'service_id'>,
  accountId: string,
): Promise<void> {
  // On the service's queue: never beside one of its deployments, which may replace the dependency.
  return enqueue(db, {
    kind: 'dependency_backup',
    subjectId: backup.id,
    accountId,
    queueKey: backup.service_id,
    maxAttempts: 3,
  });
}

/** Whether the service runs anything that may be using its dependency. */
async function inUse(deps: Pick<Deps, 'store'>, service: ServiceRow): Promise<boolean> {
  if (service.state === 'running') return true;
  const observed = await deps.store.db
    .selectFrom('service_observations')
    .select('ready_count')
    .where('service_id', '=', service.id)
    .executeTakeFirst();
  return (observed?.ready_count ?? 0) > 0;
}

/**
 * Restores a completed backup, as a job: into its dependency (`same`, the default) or into a copy of it
 * made for inspection (`new`). Into a dependency its service is using needs `force`: the service's
 * workloads stop for the restore's duration (the backup's `restore_stopped_services` says which) and
 * start again after it. A copy touches nothing that runs.
 */
export async function restoreDependencyBackup(
  deps: Pick<Deps, 'store' | 'provider' | 'config'>,
  actor: Actor,
  service: ServiceRow,
  dependency: ServiceResourceRow,
  backup: DependencyBackupRow,
  body: { force?: boolean; into?: 'same' | 'new' },
): Promise<DependencyBackupRow> {
  const into = body.into ?? 'same';
  assertNotDeleting(service);
  if (backup.state !== 'completed') {
    throw new ConflictError(
      `Backup ${backup.id} is ${backup.state}: only a completed backup can be restored`,
    );
  }
  const refusal = backupRefusal(deps, dependency);
  if (refusal) throw new ConflictError(refusal);
  const stopped = into === 'same' && (await inUse(deps, service)) ? [service.id] : [];
  if (stopped.length > 0 && body.force !== true) {
    throw new ConflictError(
      `The dependency ${qualified(dependency)} is in use by service ${service.id} (${service.name}): ` +
        `send "force": true (the CLI's --force) to stop it for the restore and start it again after`,
    );
  }
  return deps.store.db.transaction().execute(async (trx) => {
    const accepted = await changeBackup(
      trx,
      backup.id,
      {
        restore_state: 'pending',
        restore_error: '',
        restore_stopped_services: stopped,
        restore_into: into,
        restore_attributes: {},
        restore_requested: true,
      },
      { restore_state: [null, 'completed', 'failed'] },
    );
    if (!accepted) throw new ConflictError(`Backup ${backup.id} is being restored already`);
    await enqueue(trx, {
      kind: 'dependency_restore',
      subjectId: backup.id,
      accountId: service.account_id,
      queueKey: service.id,
      maxAttempts: 3,
    });
    await recordAudit(trx, actor, 'dependency_backup.restore', {
      id: backup.id,
      environmentId: service.environment_id,
    });
    return (await findBackup(trx, backup.id)) as DependencyBackupRow;
  });
}
