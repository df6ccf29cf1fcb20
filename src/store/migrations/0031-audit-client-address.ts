import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/** Who sent an audited request, as client-address.ts sees it; null where no request did (the git poller). */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, ['ALTER TABLE audit_logs ADD COLUMN client_address text']);
}
