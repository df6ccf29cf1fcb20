import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Git connections (issue 12): an account's credential for a git host, and the webhook deliveries it
 * received (kept so that a redelivered event does nothing twice).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE git_connections (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts (id),
      kind text NOT NULL CHECK (kind IN ('github', 'gitlab')),
      name text NOT NULL,
      base_url text NOT NULL,
      credential text NOT NULL CHECK (credential IN ('github_app', 'token')),
      github_app_id text,
      github_installation_id text,
      secret_sealed text NOT NULL,
      webhook_secret_sealed text NOT NULL,
      created_at timestamptz(3) NOT NULL DEFAULT clock_timestamp(),
      updated_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
    )`,
    'CREATE INDEX git_connections_by_account ON git_connections (account_id, created_at, id)',
    `CREATE TABLE git_deliveries (
      connection_id uuid NOT NULL REFERENCES git_connections (id) ON DELETE CASCADE,
      delivery_id text NOT NULL,
      event text NOT NULL,
      received_at timestamptz(3) NOT NULL DEFAULT clock_timestamp(),
      PRIMARY KEY (connection_id, delivery_id)
    )`,
    // Services found by a push: repository and branch, within an account.
    `CREATE INDEX services_by_repository ON services (account_id, lower(git_repo_full_name), git_repo_branch)
      WHERE NOT is_deleted AND git_repo_full_name IS NOT NULL`,
  ]);
}
