import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Events and webhook deliveries are written by the code that makes the change (store/events.ts), in
 * its transaction, no longer by the triggers of migrations 0018, 0019, 0033, 0034 and 0037.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    ...[
      'deployments',
      'services',
      'custom_domains',
      'service_resources',
      'dependency_backups',
      'secrets',
    ].map((table) => `DROP TRIGGER ${table}_record_event ON ${table}`),
    'DROP TRIGGER events_fan_out ON events',
    'DROP FUNCTION berth_record_event()',
    'DROP FUNCTION berth_fan_out_event()',
  ]);
}
