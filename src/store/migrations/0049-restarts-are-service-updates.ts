import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * A restart is recorded as a `service_update` (its `restored_from` names the deployment it runs
 * again): the hosted API's Deployment `type` allows only `update`, `restore` and `service_update`, so a
 * client built on it refused `restart`, and the contract reserves `restore` for rollbacks. Restarts
 * already recorded, and the events that kept them, say `service_update` too.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `UPDATE deployments SET type = 'service_update' WHERE type = 'restart'`,
    `UPDATE events SET data = jsonb_set(data, '{type}', '"service_update"')
      WHERE type LIKE 'deployment.%' AND data->>'type' = 'restart'`,
  ]);
}
