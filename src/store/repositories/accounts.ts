import type { Role } from '../../domain/roles.ts';
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

export async function insertApiToken(
  db: Db,
  row: {
    id: string;
    account_id: string;
    token_hash: string;
    name?: string | null;
    role?: Role;
    owner_user_id?: string | null;
    environment_ids?: string[] | null;
    read_only?: boolean;
    expires_at?: Date | null;
  },
) {
  await db
    .insertInto('api_tokens')
    .values({
      id: row.id,
      account_id: row.account_id,
      token_hash: row.token_hash,
      name: row.name ?? null,
      role: row.role ?? 'owner',
      owner_user_id: row.owner_user_id ?? null,
      environment_ids: row.environment_ids ? JSON.stringify(row.environment_ids) : null,
      read_only: row.read_only ?? false,
      expires_at: row.expires_at ?? null,
    })
    .execute();
}

/**
 * The token, its account and, for a token a person made, the owner's membership, in one indexed lookup
 * (token_hash is unique). A token whose owner is no longer a member finds no membership.
 */
export async function findActiveToken(db: Db, tokenHash: string) {
  return db
    .selectFrom('api_tokens')
    .innerJoin('accounts', 'accounts.id', 'api_tokens.account_id')
    .leftJoin('memberships', (join) =>
      join
        .onRef('memberships.user_id', '=', 'api_tokens.owner_user_id')
        .onRef('memberships.account_id', '=', 'api_tokens.account_id'),
    )
    .leftJoin('users', 'users.id', 'api_tokens.owner_user_id')
    .select([
      'api_tokens.id as token_id',
      'api_tokens.token_hash',
      'api_tokens.name as token_name',
      'api_tokens.role',
      'api_tokens.owner_user_id',
      'api_tokens.environment_ids',
      'api_tokens.read_only',
      'api_tokens.expires_at',
      'accounts.id as account_id',
      'accounts.plan',
      'accounts.features',
      'memberships.role as member_role',
      'memberships.environment_ids as member_environment_ids',
      'users.email as user_email',
    ])
    .where('api_tokens.token_hash', '=', tokenHash)
    .where('api_tokens.revoked_at', 'is', null)
    .executeTakeFirst();
}

/** Marks tokens used now, unless they were marked within the last minute (by any process). */
export async function touchTokens(db: Db, ids: string[], now: Date): Promise<void> {
  await db
    .updateTable('api_tokens')
    .set({ last_used_at: now })
    .where('id', 'in', ids)
    .where((eb) =>
      eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', new Date(now.getTime() - 60_000))]),
    )
    .execute();
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

/** An account's tokens with their owners, newest first; never their hashes. */
export async function listPeopleTokens(db: Db, accountId: string) {
  return db
    .selectFrom('api_tokens')
    .leftJoin('users', 'users.id', 'api_tokens.owner_user_id')
    .leftJoin('memberships', (join) =>
      join
        .onRef('memberships.user_id', '=', 'api_tokens.owner_user_id')
        .onRef('memberships.account_id', '=', 'api_tokens.account_id'),
    )
    .select([
      'api_tokens.id',
      'api_tokens.name',
      'api_tokens.role',
      'memberships.role as member_role',
      'memberships.environment_ids as member_environment_ids',
      'api_tokens.owner_user_id',
      'users.email as owner_email',
      'api_tokens.environment_ids',
      'api_tokens.read_only',
      'api_tokens.expires_at',
      'api_tokens.last_used_at',
      'api_tokens.created_at',
      'api_tokens.revoked_at',
    ])
    .where('api_tokens.account_id', '=', accountId)
    .orderBy('api_tokens.created_at', 'desc')
    .orderBy('api_tokens.id', 'desc')
    .execute();
}

/**
 * Locks one of the account's live tokens for the rest of the transaction and says its role, so that a
 * revocation decides on a role nobody changes meanwhile. Another account's, or a revoked one, is not found.
 * A person's token also says its owner's role here (`member_role`), which caps what it acts as.
 */
export async function lockLiveAccountToken(db: Db, accountId: string, id: string) {
  return db
    .selectFrom('api_tokens')
    .select((eb) => [
      'role',
      eb
        .selectFrom('memberships')
        .select('memberships.role')
        .whereRef('memberships.user_id', '=', 'api_tokens.owner_user_id')
        .whereRef('memberships.account_id', '=', 'api_tokens.account_id')
        .as('member_role'),
    ])
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .where('revoked_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
}

/** Revokes a token of this account (another account's is not found). */
export async function revokeAccountToken(db: Db, accountId: string, id: string) {
  return db
    .updateTable('api_tokens')
    .set({ revoked_at: new Date() })
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .where('revoked_at', 'is', null)
    .returning('id')
    .executeTakeFirst();
}
