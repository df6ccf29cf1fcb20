import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // The tokens are kept so the records a caller must create read the same on every GET.
    `CREATE TABLE custom_domains (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts(id),
      environment_id uuid NOT NULL REFERENCES environments(id),
      service_id uuid NOT NULL REFERENCES services(id),
      domain text NOT NULL,
      state text NOT NULL,
      prov_custom_domain_id text NOT NULL DEFAULT '',
      verify_token text NOT NULL,
      validation_token text NOT NULL,
      failure_reason text NOT NULL DEFAULT '',
      created_at timestamptz(3) NOT NULL DEFAULT clock_timestamp(),
      updated_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
    // A domain belongs to one service of one account at a time, until it is deleted.
    `CREATE UNIQUE INDEX custom_domains_domain ON custom_domains (domain) WHERE state <> 'deleted'`,
    'CREATE INDEX custom_domains_by_service ON custom_domains (service_id, created_at DESC, id DESC)',
  ]);
}
