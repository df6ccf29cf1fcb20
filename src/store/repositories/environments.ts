import type { Db } from '../database.ts';
import type { EnvironmentRow } from '../schema.ts';

export async function insertEnvironment(db: Db, row: Omit<EnvironmentRow, 'created_at' | 'updated_at'>) {
  return db.insertInto('environments').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Scoped to the account: another account's environment is not found. */
export async function findEnvironment(
  db: Db,
  accountId: string,
  id: string,
): Promise<EnvironmentRow | undefined> {
  return db
    .selectFrom('environments')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

export async function findEnvironmentById(db: Db, id: string): Promise<EnvironmentRow | undefined> {
  return db.selectFrom('environments').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function listEnvironments(db: Db, accountId: string): Promise<EnvironmentRow[]> {
  return db
    .selectFrom('environments')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('state', '!=', 'deleted')
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

export async function setEnvironmentState(db: Db, id: string, state: EnvironmentRow['state']) {
  await db.updateTable('environments').set({ state, updated_at: new Date() }).where('id', '=', id).execute();
}

export async function lockEnvironment(db: Db, id: string): Promise<void> {
  await db.selectFrom('environments').select('id').where('id', '=', id).forUpdate().execute();
}
