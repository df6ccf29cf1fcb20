import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // Facts about the installation that every process must agree on (the master key's id).
    'CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL)',
  ]);
}
