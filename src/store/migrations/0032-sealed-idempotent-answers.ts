import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * An answer stored with its Idempotency-Key is sealed from now on (it may carry a one-time secret: an
 * issued API token, a webhook's signing secret). Answers stored before were in the clear, so they go:
 * a key whose work committed stays, answered without a body (a retry gets the 409 of a request done
 * but never answered, and looks the result up); a key whose work never committed is forgotten (a retry
 * runs it, as nothing of it was done).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    'ALTER TABLE idempotency_keys RENAME COLUMN body TO body_sealed',
    'DELETE FROM idempotency_keys WHERE body_sealed IS NOT NULL AND NOT done',
    'UPDATE idempotency_keys SET status = NULL, body_sealed = NULL WHERE body_sealed IS NOT NULL',
  ]);
}
