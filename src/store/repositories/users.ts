import { sql } from 'kysely';
import type { Role } from '../../domain/roles.ts';
import type { Db } from '../database.ts';
import type { UserRow } from '../schema.ts';

export async function insertUser(db: Db, row: { id: string; email: string; display_name: string }) {
  return db.insertInto('users').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Emails are compared without case (the unique index is on lower(email)). */
export async function findUserByEmail(db: Db, email: string): Promise<UserRow | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where(sql<string>`lower(email)`, '=', email.toLowerCase())
    .executeTakeFirst();
}

export async function findUser(db: Db, id: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function listUsers(db: Db): Promise<UserRow[]> {
  return db.selectFrom('users').selectAll().orderBy('created_at').orderBy('id').execute();
}

/** Makes the user a member with this role and scope, or changes them. */
export async function upsertMembership(
  db: Db,
  row: { user_id: string; account_id: string; role: Role; environment_ids: string[] | null },
) {
  const environmentIds = row.environment_ids ? JSON.stringify(row.environment_ids) : null;
  return db
    .insertInto('memberships')
    .values({ ...row, environment_ids: environmentIds })
    .onConflict((oc) =>
      oc.columns(['account_id', 'user_id']).doUpdateSet({ role: row.role, environment_ids: environmentIds }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Makes the user a member with every environment, unless they are one already: an existing membership
 * (made by the operator, an invitation, single sign-on) is never changed. True when this made it.
 */
export async function joinUnlessMember(
  db: Db,
  row: { user_id: string; account_id: string; role: Role },
): Promise<boolean> {
  const joined = await db
    .insertInto('memberships')
    .values({ ...row, environment_ids: null })
    .onConflict((oc) => oc.columns(['account_id', 'user_id']).doNothing())
    .returning('user_id')
    .executeTakeFirst();
  return joined !== undefined;
}

export async function findMembership(db: Db, accountId: string, userId: string) {
  return db
    .selectFrom('memberships')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
}

export async function deleteMembership(db: Db, accountId: string, userId: string) {
  return db
    .deleteFrom('memberships')
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .returningAll()
    .executeTakeFirst();
}

/** An account's members with their users, oldest membership first. */
export async function listMembers(db: Db, accountId: string) {
  return db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select([
      'memberships.user_id',
      'memberships.account_id',
      'memberships.role',
      'memberships.environment_ids',
      'memberships.created_at',
      'users.email',
      'users.display_name',
    ])
    .where('memberships.account_id', '=', accountId)
    .orderBy('memberships.created_at')
    .orderBy('memberships.user_id')
    .execute();
}
