import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * The branch head the git poller last saw for each auto_deploy service. Moving it is a conditional
 * write (only from another value), so of two pollers that see the same new head, one deploys it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE git_poll_heads (
      service_id uuid PRIMARY KEY REFERENCES services (id) ON DELETE CASCADE,
      head text NOT NULL,
      seen_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
  ]);
}
