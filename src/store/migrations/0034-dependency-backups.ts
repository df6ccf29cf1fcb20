import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Logical backups of ops.json dependencies (rds, elasticache) and their restores. A backup names its
 * dependency as service_resources does (service, kind, type, id), without a foreign key to it: a backup
 * outlives a replaced dependency's row only until the service goes. `location` is the driver's name for
 * the file it wrote (relative to its backup target). One restore at a time per backup, recorded on its
 * row (`restore_*`), so a client polls one resource. Its changes are events (`dependency_backup.*`,
 * migration 0018's function): a failed backup or restore is one, with its reason.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE dependency_backups (
      id uuid PRIMARY KEY,
      service_id uuid NOT NULL REFERENCES services (id) ON DELETE CASCADE,
      kind text NOT NULL,
      type text NOT NULL,
      resource_id text NOT NULL,
      trigger text NOT NULL CHECK (trigger IN ('manual', 'scheduled')),
      state text NOT NULL CHECK (state IN ('pending', 'running', 'completed', 'failed')),
      location text NOT NULL DEFAULT '',
      size_bytes bigint,
      error text NOT NULL DEFAULT '',
      created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      completed_at timestamptz,
      restore_state text CHECK (restore_state IN ('pending', 'running', 'completed', 'failed')),
      restore_stopped_services jsonb NOT NULL DEFAULT '[]',
      restore_error text NOT NULL DEFAULT '',
      restore_requested_at timestamptz,
      restore_completed_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )`,
    `CREATE INDEX dependency_backups_by_dependency
      ON dependency_backups (service_id, kind, type, resource_id, created_at DESC)`,
    `CREATE CONSTRAINT TRIGGER dependency_backups_record_event
     AFTER INSERT OR UPDATE OR DELETE ON dependency_backups
     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
     EXECUTE FUNCTION berth_record_event('dependency_backup', 'service_id', 'skip_touch', 'id', 'service_id',
       'kind', 'type', 'resource_id', 'trigger', 'state', 'size_bytes', 'error', 'created_at', 'completed_at',
       'restore_state', 'restore_stopped_services', 'restore_error', 'restore_requested_at',
       'restore_completed_at', 'updated_at')`,
  ]);
}
