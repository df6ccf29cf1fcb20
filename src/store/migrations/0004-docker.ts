import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // The docker provider's routing table: which deployment's containers serve a service, and the
    // ops.json that deployment runs with (the ingress honours it). Containers carry their ids in labels;
    // this row says which of them take traffic, across restarts and processes.
    `CREATE TABLE docker_routes (
      service_id uuid PRIMARY KEY,
      deployment_id uuid NOT NULL,
      port integer,
      ops jsonb NOT NULL,
      updated_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
    // Subdomains are chosen unique across environments (they share the docker ingress); looked up by it.
    'CREATE INDEX services_by_subdomain ON services (subdomain) WHERE NOT is_deleted',
  ]);
}
