import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // A deployment's log: `seq` orders every line (and is the cursor a follower resumes from). Writers
    // of one deployment take a transaction-scoped advisory lock on it, so lines commit in seq order.
    // `dropped` marks the one row standing for the oldest lines trimmed past the bound.
    `CREATE TABLE deployment_logs (
      seq bigserial PRIMARY KEY,
      deployment_id uuid NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
      step text NOT NULL,
      line text NOT NULL,
      dropped integer,
      at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
    'CREATE INDEX deployment_logs_by_deployment ON deployment_logs (deployment_id, seq)',
    // One row per step a deployment went through: its state and timing.
    `CREATE TABLE deployment_operations (
      deployment_id uuid NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
      step text NOT NULL,
      state text NOT NULL,
      detail text NOT NULL DEFAULT '',
      started_at timestamptz(3) NOT NULL,
      finished_at timestamptz(3),
      PRIMARY KEY (deployment_id, step)
    )`,
  ]);
}
