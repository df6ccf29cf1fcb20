import { type Insertable, sql } from 'kysely';
import type { Db } from '../database.ts';
import type { SecretRow, SecretsTable } from '../schema.ts';

export async function listSecrets(db: Db, scopeId: string): Promise<SecretRow[]> {
  // Byte order, whatever the database's collation: the same order the PUT answers in.
  return db
    .selectFrom('secrets')
    .selectAll()
    .where('scope_id', '=', scopeId)
    .orderBy(sql`key COLLATE "C"`)
    .execute();
}

/** Full replace of one scope's secrets: run it inside the caller's transaction. */
export async function replaceSecrets(
  db: Db,
  scopeId: string,
  rows: Insertable<SecretsTable>[],
): Promise<void> {
  await db.deleteFrom('secrets').where('scope_id', '=', scopeId).execute();
  if (rows.length > 0) await db.insertInto('secrets').values(rows).execute();
}
