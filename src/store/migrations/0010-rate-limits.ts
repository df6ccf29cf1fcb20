import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // The per-token request window, shared by every API process on one Postgres database. One row per
    // key (an API token id), rewritten in place when its window ends, so the table stays small.
    `CREATE TABLE rate_limit_windows (
      key text PRIMARY KEY,
      window_start timestamptz NOT NULL,
      hits integer NOT NULL
    )`,
  ]);
}
