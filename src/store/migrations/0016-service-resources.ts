import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/** ops.json dependencies as resources: what Berth asked a provider to make for a service, and what it got. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE service_resources (
      service_id uuid NOT NULL REFERENCES services (id) ON DELETE CASCADE,
      kind text NOT NULL,
      type text NOT NULL,
      resource_id text NOT NULL,
      prefix text NOT NULL,
      spec jsonb NOT NULL,
      state text NOT NULL,
      attributes jsonb NOT NULL DEFAULT '{}',
      password text,
      error text NOT NULL DEFAULT '',
      provisioned_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      PRIMARY KEY (service_id, kind, type, resource_id)
    )`,
  ]);
}
