import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // One row per Idempotency-Key and caller (an account id, or `admin`): the request it was first
    // used with and, once answered, that answer. A row without a status is a request still running.
    `CREATE TABLE idempotency_keys (
      scope text NOT NULL,
      key text NOT NULL,
      fingerprint text NOT NULL,
      status integer,
      body text,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (scope, key)
    )`,
    'CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)',
  ]);
}
