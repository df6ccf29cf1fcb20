import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // A secrets job names its scope in its kind; one queued before that learns it here, once.
    `UPDATE jobs SET kind = CASE
       WHEN EXISTS (SELECT 1 FROM services s WHERE s.id = jobs.subject_id) THEN 'write_service_secrets'
       ELSE 'write_environment_secrets' END
     WHERE kind = 'write_secrets'`,
  ]);
}
