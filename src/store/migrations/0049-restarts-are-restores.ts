import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * A restart is recorded as a `restore` of the serving deployment: the hosted API's Deployment `type`
 * allows only `update`, `restore` and `service_update`, and a client built on it refused `restart`.
 * Restarts already recorded, and the events that kept them, say `restore` too.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `UPDATE deployments SET type = 'restore' WHERE type = 'restart'`,
    `UPDATE events SET data = jsonb_set(data, '{type}', '"restore"')
      WHERE type LIKE 'deployment.%' AND data->>'type' = 'restart'`,
  ]);
}
