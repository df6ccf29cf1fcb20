import { sql } from 'kysely';
import type { Db } from '../database.ts';
import { changedSince, eventState, inTransaction, recordEvents } from '../events.ts';
import type { BackupState, DependencyBackupRow } from '../schema.ts';
import type { ResourceRef } from './resources.ts';

const ofDependency = (serviceId: string, ref: ResourceRef) => ({
  service_id: serviceId,
  kind: ref.kind,
  type: ref.type,
  resource_id: ref.resource_id,
});

/** A dependency's backups, newest first. */
export function listBackups(db: Db, serviceId: string, ref: ResourceRef): Promise<DependencyBackupRow[]> {
  return db
    .selectFrom('dependency_backups')
    .selectAll()
    .where('service_id', '=', serviceId)
    .where('kind', '=', ref.kind)
    .where('type', '=', ref.type)
    .where('resource_id', '=', ref.resource_id)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
}

export function findBackup(db: Db, id: string): Promise<DependencyBackupRow | undefined> {
  return db.selectFrom('dependency_backups').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function insertBackup(
  db: Db,
  backup: { id: string; serviceId: string; ref: ResourceRef; trigger: 'manual' | 'scheduled' },
): Promise<DependencyBackupRow> {
  return inTransaction(db, async (trx) => {
    const row = await trx
      .insertInto('dependency_backups')
      .values({
        id: backup.id,
        ...ofDependency(backup.serviceId, backup.ref),
        trigger: backup.trigger,
        state: 'pending',
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvents(trx, 'dependency_backup', 'created', [row]);
    return row;
  });
}

export interface BackupChange {
  state?: BackupState;
  location?: string;
  size_bytes?: number;
  error?: string;
  completed?: boolean;
  restore_state?: BackupState;
  restore_stopped_services?: string[];
  restore_into?: 'same' | 'new';
  restore_attributes?: Record<string, string>;
  restore_error?: string;
  restore_requested?: boolean;
  restore_completed?: boolean;
}

/** Changes a backup's row; `from`: only while its state (or restore state) is one of these. */
export async function changeBackup(
  db: Db,
  id: string,
  change: BackupChange,
  from?: { state?: BackupState[]; restore_state?: (BackupState | null)[] },
): Promise<boolean> {
  const {
    completed,
    restore_requested,
    restore_completed,
    restore_stopped_services,
    restore_attributes,
    ...rest
  } = change;
  return inTransaction(db, async (trx) => {
    // The row, locked first as `before`: the update records an event only when it changed more than updated_at.
    let locked = trx
      .selectFrom('dependency_backups')
      .select(['id as before_id', eventState('dependency_backup', 'dependency_backups').as('before_state')])
      .where('id', '=', id);
    if (from?.state) locked = locked.where('state', 'in', from.state);
    if (from?.restore_state) {
      const states = from.restore_state.filter((s) => s !== null);
      const orNull = from.restore_state.includes(null);
      locked = locked.where((eb) =>
        eb.or([
          ...(states.length > 0 ? [eb('restore_state', 'in', states)] : []),
          ...(orNull ? [eb('restore_state', 'is', null)] : []),
        ]),
      );
    }
    const rows = await trx
      .updateTable('dependency_backups')
      .from(locked.forNoKeyUpdate().as('before'))
      .set({
        ...rest,
        ...(completed ? { completed_at: sql<Date>`clock_timestamp()` } : {}),
        ...(restore_requested
          ? { restore_requested_at: sql<Date>`clock_timestamp()`, restore_completed_at: null }
          : {}),
        ...(restore_completed ? { restore_completed_at: sql<Date>`clock_timestamp()` } : {}),
        ...(restore_stopped_services
          ? { restore_stopped_services: JSON.stringify(restore_stopped_services) }
          : {}),
        ...(restore_attributes ? { restore_attributes: JSON.stringify(restore_attributes) } : {}),
        updated_at: sql`clock_timestamp()`,
      })
      .whereRef('dependency_backups.id', '=', 'before.before_id')
      .returningAll('dependency_backups')
      .returning(changedSince('dependency_backup', 'dependency_backups').as('changed'))
      .execute();
    await recordEvents(
      trx,
      'dependency_backup',
      'updated',
      rows.filter((r) => r.changed),
    );
    return rows.length > 0;
  });
}

/** The services that restores under way, other than the backup `id`'s, stop (or will: those pending). */
export async function servicesStoppedByOtherRestores(db: Db, id: string): Promise<Set<string>> {
  const rows = await db
    .selectFrom('dependency_backups')
    .select('restore_stopped_services')
    .where('id', '!=', id)
    .where('restore_state', 'in', ['pending', 'running'])
    .where('restore_into', 'is distinct from', 'new')
    .execute();
  return new Set(rows.flatMap((r) => r.restore_stopped_services));
}

/**
 * The completed backups of a dependency past the newest `keep` (retention): only completed ones count
 * and only they go, so a failed backup never takes the place of a good one.
 */
export function completedBeyond(
  db: Db,
  serviceId: string,
  ref: ResourceRef,
  keep: number,
): Promise<DependencyBackupRow[]> {
  return (
    db
      .selectFrom('dependency_backups')
      .selectAll()
      .where('service_id', '=', serviceId)
      .where('kind', '=', ref.kind)
      .where('type', '=', ref.type)
      .where('resource_id', '=', ref.resource_id)
      .where('state', '=', 'completed')
      // A backup being restored stays until its restore ends.
      .where((eb) =>
        eb.or([eb('restore_state', 'is', null), eb('restore_state', 'not in', ['pending', 'running'])]),
      )
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .offset(keep)
      .limit(1000)
      .execute()
  );
}

/** Failed backups of a dependency past the newest `keep`: records of attempts, with no file. */
export async function pruneFailedBackups(db: Db, serviceId: string, ref: ResourceRef, keep: number) {
  const old = await db
    .selectFrom('dependency_backups')
    .select('id')
    .where('service_id', '=', serviceId)
    .where('kind', '=', ref.kind)
    .where('type', '=', ref.type)
    .where('resource_id', '=', ref.resource_id)
    .where('state', '=', 'failed')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .offset(keep)
    .limit(1000)
    .execute();
  await deleteBackups(
    db,
    old.map((r) => r.id),
  );
}

export async function deleteBackup(db: Db, id: string): Promise<void> {
  await deleteBackups(db, [id]);
}

async function deleteBackups(db: Db, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await inTransaction(db, async (trx) => {
    const gone = await trx.deleteFrom('dependency_backups').where('id', 'in', ids).returningAll().execute();
    await recordEvents(trx, 'dependency_backup', 'deleted', gone);
  });
}

/** A dependency that is due a scheduled backup: its service, account and declared retention. */
export interface DueDependency {
  service_id: string;
  account_id: string;
  kind: string;
  type: string;
  resource_id: string;
}

/**
 * The dependencies made more than `intervalMs` ago whose newest scheduled backup (of any outcome) is
 * older than that, or which have none: made (`available`), of a live service, of the kinds that have
 * dump tools, and not declared with `"backups": false`. So a new dependency's first scheduled backup
 * comes an interval after it was made.
 */
export function dueForBackup(db: Db, intervalMs: number, kinds: readonly string[]): Promise<DueDependency[]> {
  return db
    .selectFrom('service_resources as r')
    .innerJoin('services as s', 's.id', 'r.service_id')
    .select(['r.service_id', 's.account_id', 'r.kind', 'r.type', 'r.resource_id'])
    .where('r.state', '=', 'available')
    .where(
      'r.provisioned_at',
      '<=',
      sql<Date>`clock_timestamp() - make_interval(secs => ${intervalMs / 1000})`,
    )
    .where('s.is_deleted', '=', false)
    .where(sql<string>`r.kind || '.' || r.type`, 'in', kinds)
    .where(sql<boolean>`coalesce(r.spec -> 'properties' ->> 'backups', 'true') <> 'false'`)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('dependency_backups as b')
            .select(sql`1`.as('one'))
            .whereRef('b.service_id', '=', 'r.service_id')
            .whereRef('b.kind', '=', 'r.kind')
            .whereRef('b.type', '=', 'r.type')
            .whereRef('b.resource_id', '=', 'r.resource_id')
            .where('b.trigger', '=', 'scheduled')
            .where(
              'b.created_at',
              '>',
              sql<Date>`clock_timestamp() - make_interval(secs => ${intervalMs / 1000})`,
            ),
        ),
      ),
    )
    .limit(500)
    .execute();
}
