import type { Role } from '../../domain/roles.ts';
import type { Db } from '../database.ts';

export async function insertSession(
  db: Db,
  row: {
    id: string;
    secret_hash: string;
    user_id: string;
    account_id: string;
    expires_at: Date;
    user_agent: string | null;
    client_address: string | null;
  },
) {
  return db.insertInto('sessions').values(row).returningAll().executeTakeFirstOrThrow();
}

/**
 * A session that still works: not ended, before its absolute expiry, seen within the idle limit, and its
 * user still a member of its account (with the membership's role and scope as they are now).
 */
export async function findLiveSession(db: Db, secretHash: string, idleSince: Date) {
  return db
    .selectFrom('sessions')
    .innerJoin('memberships', (join) =>
      join
        .onRef('memberships.user_id', '=', 'sessions.user_id')
        .onRef('memberships.account_id', '=', 'sessions.account_id'),
    )
    .innerJoin('users', 'users.id', 'sessions.user_id')
    .innerJoin('accounts', 'accounts.id', 'sessions.account_id')
    .select([
      'sessions.id',
      'sessions.secret_hash',
      'sessions.user_id',
      'sessions.account_id',
      'sessions.last_seen_at',
      'memberships.role',
      'memberships.environment_ids',
      'users.email',
      'accounts.plan',
      'accounts.features',
    ])
    .where('sessions.secret_hash', '=', secretHash)
    .where('sessions.ended_at', 'is', null)
    .where('sessions.expires_at', '>', new Date())
    .where('sessions.last_seen_at', '>', idleSince)
    .executeTakeFirst();
}

export async function touchSession(db: Db, id: string, now: Date): Promise<void> {
  await db.updateTable('sessions').set({ last_seen_at: now }).where('id', '=', id).execute();
}

/** A user's sessions that have not ended nor expired, newest first. */
export async function listLiveSessions(db: Db, userId: string, idleSince: Date) {
  return db
    .selectFrom('sessions')
    .selectAll()
    .where('user_id', '=', userId)
    .where('ended_at', 'is', null)
    .where('expires_at', '>', new Date())
    .where('last_seen_at', '>', idleSince)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
}

/** Ends one of a user's sessions; undefined when it is not theirs or ended already. */
export async function endSession(db: Db, userId: string, id: string) {
  return db
    .updateTable('sessions')
    .set({ ended_at: new Date() })
    .where('id', '=', id)
    .where('user_id', '=', userId)
    .where('ended_at', 'is', null)
    .returning(['id'])
    .executeTakeFirst();
}

/** Ends a user's sessions in an account (their membership ended). */
export async function endSessionsIn(db: Db, accountId: string, userId: string) {
  return db
    .updateTable('sessions')
    .set({ ended_at: new Date() })
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where('ended_at', 'is', null)
    .returning(['id'])
    .execute();
}

export async function insertSignInLink(
  db: Db,
  row: { id: string; secret_hash: string; user_id: string; account_id: string; expires_at: Date },
) {
  return db.insertInto('sign_in_links').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Uses a link up: only once, only before it expires (two redeeming at once: one wins). */
export async function useSignInLink(db: Db, secretHash: string) {
  return db
    .updateTable('sign_in_links')
    .set({ used_at: new Date() })
    .where('secret_hash', '=', secretHash)
    .where('used_at', 'is', null)
    .where('expires_at', '>', new Date())
    .returningAll()
    .executeTakeFirst();
}

export async function setPasswordHash(db: Db, userId: string, passwordHash: string): Promise<void> {
  await db.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', userId).execute();
}

export async function insertInvitation(
  db: Db,
  row: {
    id: string;
    secret_hash: string;
    account_id: string;
    email: string;
    role: Role;
    invited_by: string | null;
    expires_at: Date;
  },
) {
  return db.insertInto('invitations').values(row).returningAll().executeTakeFirstOrThrow();
}

/** An account's invitations still waiting to be accepted, newest first, with who made each. */
export async function listPendingInvitations(db: Db, accountId: string) {
  return db
    .selectFrom('invitations')
    .leftJoin('users', 'users.id', 'invitations.invited_by')
    .select([
      'invitations.id',
      'invitations.email',
      'invitations.role',
      'invitations.invited_by',
      'invitations.created_at',
      'invitations.expires_at',
      'users.email as inviter_email',
    ])
    .where('invitations.account_id', '=', accountId)
    .where('invitations.accepted_at', 'is', null)
    .where('invitations.expires_at', '>', new Date())
    .orderBy('invitations.created_at', 'desc')
    .orderBy('invitations.id', 'desc')
    .execute();
}

/** One of the account's pending invitations, locked for its revocation. */
export async function findPendingInvitation(db: Db, accountId: string, id: string) {
  return db
    .selectFrom('invitations')
    .select(['id', 'role'])
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .where('accepted_at', 'is', null)
    .where('expires_at', '>', new Date())
    .forUpdate()
    .executeTakeFirst();
}

export async function deleteInvitation(db: Db, id: string): Promise<void> {
  await db.deleteFrom('invitations').where('id', '=', id).execute();
}

/** Uses an invitation up: only once, only before it expires. */
export async function acceptInvitationRow(db: Db, secretHash: string) {
  return db
    .updateTable('invitations')
    .set({ accepted_at: new Date() })
    .where('secret_hash', '=', secretHash)
    .where('accepted_at', 'is', null)
    .where('expires_at', '>', new Date())
    .returningAll()
    .executeTakeFirst();
}
