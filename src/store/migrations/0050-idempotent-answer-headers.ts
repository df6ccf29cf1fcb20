import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * The headers that are part of a stored answer (`x-berth-service-id` of a create whose deploy_now
 * failed), as a JSON object: a retry with the same Idempotency-Key gets them again with the body.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, ['ALTER TABLE idempotency_keys ADD COLUMN answer_headers text']);
}
