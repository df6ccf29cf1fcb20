import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // The image a deployment ran, as the runtime resolved it (a tag moves; a digest does not).
    "ALTER TABLE deployments ADD COLUMN docker_image_digest text NOT NULL DEFAULT ''",
  ]);
}
