import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Master key rotation (store/key-rotation.ts): the setting naming the key values are sealed with names
 * every key they may be sealed with (comma-separated), and re-sealing a secret is no event: the rotation
 * sets `berth.resealing` in its transactions, and the secrets trigger (0018) skips their writes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `UPDATE settings SET key = 'master_key_ids' WHERE key = 'master_key_id'`,
    'DROP TRIGGER secrets_record_event ON secrets',
    `CREATE CONSTRAINT TRIGGER secrets_record_event AFTER INSERT OR UPDATE OR DELETE ON secrets
     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
     WHEN (current_setting('berth.resealing', true) IS DISTINCT FROM 'on')
     EXECUTE FUNCTION berth_record_event('secret', 'scope', 'every_write', 'scope', 'scope_id', 'key',
       'is_sensitive', 'description', 'updated_at')`,
  ]);
}
