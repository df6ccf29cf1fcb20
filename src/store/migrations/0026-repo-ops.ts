import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * The ops config a git service's newest started deployment read from its repository (OpsConfig JSON):
 * GET service reports its dependencies, as it does a docker_image service's inline ops_json.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, ['ALTER TABLE services ADD COLUMN repo_ops text']);
}
