import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Webhooks routed before any signature is checked (issue 24): a delivery to `/hooks/{kind}` finds the
 * connections it can belong to by the App installation, the App or the repository it names, by index. And the
 * commit time of the newest push deployed on each service, so that a replayed older push is refused.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    'CREATE INDEX git_connections_by_installation ON git_connections (kind, github_installation_id)',
    'CREATE INDEX git_connections_by_app ON git_connections (kind, github_app_id)',
    `CREATE INDEX services_by_repository_of_source ON services (source, lower(git_repo_full_name))
      WHERE NOT is_deleted AND git_repo_full_name IS NOT NULL`,
    'ALTER TABLE git_poll_heads ADD COLUMN pushed_at timestamptz(3)',
  ]);
}
