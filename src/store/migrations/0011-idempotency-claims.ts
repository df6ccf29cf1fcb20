import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // `claim` names the request now holding the key (a new one when an abandoned key is taken over);
    // `done` is set by the transaction that does that request's work, so a key whose work committed is
    // never taken over and run a second time, even when its answer was never stored.
    'ALTER TABLE idempotency_keys ADD COLUMN claim text',
    'ALTER TABLE idempotency_keys ADD COLUMN done boolean NOT NULL DEFAULT false',
  ]);
}
