import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/** A deployment's timeline (domain/deployment-states.ts's TIMELINE_MARKS): when each moment first happened. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE deployment_timeline (
      deployment_id uuid NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
      mark text NOT NULL,
      at timestamptz(3) NOT NULL,
      PRIMARY KEY (deployment_id, mark)
    )`,
  ]);
}
