import type { Db } from '../database.ts';
import type { AccountRow, ApiTokenRow } from '../schema.ts';

export async function insertAccount(
  db: Db,
  row: { id: string; name: string; plan: AccountRow['plan']; features: string[] },
) {
  return db
    .insertInto('accounts')
    .values({ ...row, features: JSON.stringify(row.features) })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function updateAccount(
  db: Db,
  id: string,
  patch: { plan?: AccountRow['plan']; features?: string[] },
) {
  return db
    .updateTable('accounts')
    .set({
      ...(patch.plan !== undefined && { plan: patch.plan }),
      ...(patch.features !== undefined && { features: JSON.stringify(patch.features) }),
      updated_at: new Date(),
    })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function findAccount(db: Db, id: string): Promise<AccountRow | undefined> {
  return db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function listAccounts(db: Db): Promise<AccountRow[]> {
  return db.selectFrom('accounts').selectAll().orderBy('created_at').orderBy('id').execute();
}

export async function countAccounts(db: Db): Promise<number> {
  const row = await db
    .selectFrom('accounts')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function insertApiToken(db: Db, row: { id: string; account_id: string; token_hash: string }) {
  await db.insertInto('api_tokens').values(row).execute();
}

/** The token and its account in one indexed lookup (token_hash is unique). */
export async function findActiveToken(db: Db, tokenHash: string) {
  return db
    .selectFrom('api_tokens')
    .innerJoin('accounts', 'accounts.id', 'api_tokens.account_id')
    .select([
      'api_tokens.id as token_id',
      'api_tokens.token_hash',
      'accounts.id as account_id',
      'accounts.plan',
      'accounts.features',
    ])
    .where('api_tokens.token_hash', '=', tokenHash)
    .where('api_tokens.revoked_at', 'is', null)
    .executeTakeFirst();
}

/** An account's tokens, oldest first; never their hashes. */
export async function listApiTokens(db: Db, accountId: string) {
  return db
    .selectFrom('api_tokens')
    .select(['id', 'account_id', 'created_at', 'revoked_at'])
    .where('account_id', '=', accountId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

export async function revokeToken(db: Db, id: string): Promise<ApiTokenRow | undefined> {
  return db
    .updateTable('api_tokens')
    .set({ revoked_at: new Date() })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}
