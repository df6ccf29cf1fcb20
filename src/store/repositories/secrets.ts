import type { Insertable } from 'kysely';
import type { Db } from '../database.ts';
import type { SecretRow, SecretsTable } from '../schema.ts';

export async function listSecrets(db: Db, scopeId: string): Promise<SecretRow[]> {
  return db.selectFrom('secrets').selectAll().where('scope_id', '=', scopeId).orderBy('key').execute();
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
