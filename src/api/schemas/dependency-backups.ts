import { Type } from 'typebox';
import { CLOSED, DateTime, Nullable, StringEnum, Uuid } from './common.ts';

const BackupState = StringEnum(['pending', 'running', 'completed', 'failed'] as const, { maxLength: 20 });

const DependencyId = Type.String({
  description:
    "the dependency's ops.json `id` as GET .../dependencies lists it, or `kind.type.id` (`rds.instances.main-db`) where two types share an id",
});
export const DependencyBackupParams = Type.Object({
  envId: Uuid,
  serviceId: Uuid,
  dependencyId: DependencyId,
});
export const DependencyBackupItemParams = Type.Object({
  envId: Uuid,
  serviceId: Uuid,
  dependencyId: DependencyId,
  backupId: Uuid,
});

/** A logical backup of a dependency, and its latest restore. */
export const DependencyBackup = Type.Object({
  id: Uuid,
  state: BackupState,
  trigger: StringEnum(['manual', 'scheduled'] as const, {
    maxLength: 20,
    description: '`manual`: asked for with POST .../backups; `scheduled`: by the backup schedule',
  }),
  size_bytes: Nullable(Type.Integer({ minimum: 0, description: "the dump file's size once completed" })),
  created_at: DateTime,
  completed_at: Nullable(DateTime),
  error: Type.String({
    maxLength: 2000,
    description: 'why it failed (or why an attempt will be retried); empty otherwise',
  }),
  /** The latest restore of this backup; null when it was never restored. */
  restore: Nullable(
    Type.Object({
      state: BackupState,
      stopped_services: Type.Array(Uuid, {
        description:
          "the services stopped for the restore's duration (started again after it); empty when none was using the dependency",
      }),
      into: StringEnum(['same', 'new'] as const, {
        maxLength: 10,
        description: '`same`: into the dependency itself; `new`: into a copy made for inspection',
      }),
      attributes: Type.Record(Type.String({ maxLength: 100 }), Type.String({ maxLength: 1000 }), {
        description:
          "`new`: the copy's resolved attributes (its address on the environment's network; never a password: it has the dependency's own); empty for `same`",
      }),
      error: Type.String({ maxLength: 2000 }),
      requested_at: DateTime,
      completed_at: Nullable(DateTime),
    }),
  ),
});

export const DependencyBackupsData = Type.Object({ backups: Type.Array(DependencyBackup) });
export const DependencyBackupData = Type.Object({ backup: DependencyBackup });
export const RestoreBody = Type.Object(
  {
    force: Type.Optional(
      Type.Boolean({
        description: 'required (true) when a service is using the dependency: it is stopped for the restore',
      }),
    ),
    into: Type.Optional(
      StringEnum(['same', 'new'] as const, {
        maxLength: 10,
        description:
          "`same` (default): replace the dependency's data; `new`: load it into a copy of the dependency for inspection (one per dependency, replaced by the next; no service stops)",
      }),
    ),
  },
  CLOSED,
);
