import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * A restore goes into the dependency itself (`same`) or into a copy made for inspection (`new`), whose
 * attributes (never a password) the backup keeps; the event records where it went.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `ALTER TABLE dependency_backups
       ADD COLUMN restore_into text CHECK (restore_into IN ('same', 'new')),
       ADD COLUMN restore_attributes jsonb NOT NULL DEFAULT '{}'`,
    'DROP TRIGGER dependency_backups_record_event ON dependency_backups',
    `CREATE CONSTRAINT TRIGGER dependency_backups_record_event
     AFTER INSERT OR UPDATE OR DELETE ON dependency_backups
     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
     EXECUTE FUNCTION berth_record_event('dependency_backup', 'service_id', 'skip_touch', 'id', 'service_id',
       'kind', 'type', 'resource_id', 'trigger', 'state', 'size_bytes', 'error', 'created_at', 'completed_at',
       'restore_state', 'restore_into', 'restore_stopped_services', 'restore_error', 'restore_requested_at',
       'restore_completed_at', 'updated_at')`,
  ]);
}
