import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // A deployment's generation: the fencing token every provider change carries. One sequence for all
    // deployments is monotonic per service too (a service's deployments are inserted under its row lock).
    'CREATE SEQUENCE deployments_generation_seq',
    'ALTER TABLE deployments ADD COLUMN generation bigint',
    `UPDATE deployments SET generation = numbered.n
       FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM deployments) AS numbered
      WHERE deployments.id = numbered.id`,
    `SELECT setval('deployments_generation_seq', (SELECT count(*) + 1 FROM deployments), false)`,
    `ALTER TABLE deployments ALTER COLUMN generation SET DEFAULT nextval('deployments_generation_seq')`,
    'ALTER TABLE deployments ALTER COLUMN generation SET NOT NULL',
    'ALTER SEQUENCE deployments_generation_seq OWNED BY deployments.generation',
    // What the provider last reported running for a service, written back by the jobs layer: the API
    // reads this instead of asking the provider on every request.
    `CREATE TABLE service_observations (
      service_id uuid PRIMARY KEY REFERENCES services(id),
      run_status text NOT NULL,
      ready_count integer NOT NULL,
      observed_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
  ]);
}
