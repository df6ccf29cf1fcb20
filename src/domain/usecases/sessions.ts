/**
 * People signing in (docs/access.md): email and password, or a one-time sign-in link (which may set the
 * password), each starting a session that acts in one account as the user's membership there. A session
 * ends when its user signs out or ends it, when it has been idle too long, at its absolute expiry, and
 * when the membership ends.
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import { accessKey, notify } from '../../store/notifications.ts';
import {
  acceptInvitationRow,
  deleteInvitation,
  endSession,
  findPendingInvitation,
  insertInvitation,
  insertSession,
  insertSignInLink,
  listLiveSessions,
  listPendingInvitations,
  setPasswordHash,
  useSignInLink,
} from '../../store/repositories/sessions.ts';
import {
  findMembership,
  findUser,
  findUserByEmail,
  insertUser,
  joinUnlessMember,
} from '../../store/repositories/users.ts';
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  UnauthorizedError,
  ValidationError,
} from '../errors.ts';
import { hashPassword, hashSecret, newSecret, passwordMatches, passwordProblem } from '../passwords.ts';
import { type Role, roleAtLeast } from '../roles.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Call, Deps } from './context.ts';

/** A session ends after this long without a request... */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000;
/** ...and this long after sign-in in any case. */
export const SESSION_MAX_MS = 7 * 24 * 60 * 60 * 1000;
/** A one-time sign-in link works for a day. */
export const SIGN_IN_LINK_MS = 24 * 60 * 60 * 1000;

export interface SignInCall extends Call {
  userAgent: string | undefined;
}

const WRONG = 'The email or the password is wrong';

export async function oldestMembership(db: Db, userId: string) {
  return db
    .selectFrom('memberships')
    .selectAll()
    .where('user_id', '=', userId)
    .orderBy('created_at')
    .orderBy('account_id')
    .executeTakeFirst();
}

/** Starts a session for a member; the audit entry names them (`how` is its action). */
export async function startSession(
  db: Db,
  call: SignInCall,
  user: { id: string; email: string },
  accountId: string | undefined,
  how: string,
) {
  const membership = accountId
    ? await findMembership(db, accountId, user.id)
    : await oldestMembership(db, user.id);
  if (!membership) {
    throw new ForbiddenError(
      accountId ? 'You are not a member of this account' : 'You are not a member of any account',
    );
  }
  const secret = newSecret();
  const session = await insertSession(db, {
    id: randomUUID(),
    secret_hash: hashSecret(secret),
    user_id: user.id,
    account_id: membership.account_id,
    expires_at: new Date(Date.now() + SESSION_MAX_MS),
    user_agent: call.userAgent?.slice(0, 400) ?? null,
    client_address: call.clientAddress ?? null,
  });
  const actor: Actor = {
    ...call,
    accountId: membership.account_id,
    tokenId: null,
    name: user.email,
    userId: user.id,
    userEmail: user.email,
    userAgent: session.user_agent ?? undefined,
  };
  await recordAudit(db, actor, how, { type: 'session', id: session.id });
  return { secret, session, user, role: membership.role };
}

/**
 * Email and password. Unknown email, no password set, wrong password: the same 401 after the same work
 * (passwords.ts), so that nothing tells who has an account.
 */
export async function signIn(
  deps: Pick<Deps, 'store'>,
  call: SignInCall,
  input: { email: string; password: string; account_id?: string | undefined },
) {
  const user = await findUserByEmail(deps.store.db, input.email);
  if (!(await passwordMatches(user?.password_hash, input.password)) || !user) {
    throw new UnauthorizedError(WRONG);
  }
  return deps.store.db
    .transaction()
    .execute((trx) => startSession(trx, call, user, input.account_id, 'session.sign_in'));
}

/** Where the console takes a one-time link (relative to the server's address). */
export function signInLinkPath(secret: string): string {
  return `/#/sign-in-link?token=${secret}`;
}

/** A one-time link for a member, to sign in once (and set a password): shown to whoever asked for it. */
export async function createSignInLink(deps: Pick<Deps, 'store'>, accountId: string, userId: string) {
  return deps.store.db.transaction().execute(async (trx) => {
    if (!(await findMembership(trx, accountId, userId))) throw new NotFoundError('Member');
    const secret = newSecret();
    const link = await insertSignInLink(trx, {
      id: randomUUID(),
      secret_hash: hashSecret(secret),
      user_id: userId,
      account_id: accountId,
      expires_at: new Date(Date.now() + SIGN_IN_LINK_MS),
    });
    return { secret, expiresAt: link.expires_at };
  });
}

/** Signs in with a one-time link, setting the password when one is given. Works once, before it expires. */
export async function redeemSignInLink(
  deps: Pick<Deps, 'store'>,
  call: SignInCall,
  input: { token: string; password?: string | undefined },
) {
  const secretHash = hashSecret(input.token);
  return deps.store.db.transaction().execute(async (trx) => {
    const link = await useSignInLink(trx, secretHash);
    if (!link) throw new UnauthorizedError('This sign-in link is unknown, used already or expired');
    const user = await findUser(trx, link.user_id);
    if (!user) throw new UnauthorizedError('This sign-in link is unknown, used already or expired');
    if (input.password !== undefined) {
      // A refused password rolls the transaction back: the link still works for another try.
      const problem = passwordProblem(input.password, user.email);
      if (problem) throw ValidationError.fields([problem]);
      await setPasswordHash(trx, user.id, await hashPassword(input.password));
    }
    return startSession(trx, call, user, link.account_id, 'session.sign_in_link');
  });
}

/** A user's sessions that still work, newest first. */
export async function listSessions(deps: Pick<Deps, 'store'>, userId: string) {
  return listLiveSessions(deps.store.db, userId, new Date(Date.now() - SESSION_IDLE_MS));
}

/** Ends one of the caller's sessions (404 for anyone else's); its open streams close, in every process. */
export async function endSessionOf(deps: Pick<Deps, 'store'>, actor: Actor, sessionId: string) {
  if (!actor.userId) throw new NotFoundError('Session');
  const userId = actor.userId;
  await deps.store.db.transaction().execute(async (trx) => {
    if (!(await endSession(trx, userId, sessionId))) throw new NotFoundError('Session');
    await recordAudit(trx, actor, 'session.end', { type: 'session', id: sessionId });
    await notify(trx, 'access', accessKey('token', sessionId));
  });
}

/** An invitation works for a week. */
export const INVITATION_MS = 7 * 24 * 60 * 60 * 1000;

/** Where the console takes an invitation (relative to the server's address). */
export function invitationPath(secret: string): string {
  return `/#/accept-invitation?token=${secret}`;
}

/**
 * An owner or admin invites an email address with a role no higher than their own (else 422 on `role`);
 * the link is answered to them (and mailed, when Berth can send mail).
 */
export async function createInvitation(
  deps: Pick<Deps, 'store'>,
  inviter: Actor & { role: Role },
  input: { email: string; role: Role },
) {
  if (!roleAtLeast(inviter.role, input.role)) {
    throw ValidationError.fields([
      { field: 'role', error: `role cannot be higher than your own role (${inviter.role})` },
    ]);
  }
  return deps.store.db.transaction().execute(async (trx) => {
    const user = await findUserByEmail(trx, input.email);
    if (user && (await findMembership(trx, inviter.accountId, user.id))) {
      throw new ConflictError(`${input.email} is a member of this account already`);
    }
    const secret = newSecret();
    const invitation = await insertInvitation(trx, {
      id: randomUUID(),
      secret_hash: hashSecret(secret),
      account_id: inviter.accountId,
      email: input.email,
      role: input.role,
      invited_by: inviter.userId ?? null,
      expires_at: new Date(Date.now() + INVITATION_MS),
    });
    await recordAudit(trx, inviter, 'invitation.create', { type: 'invitation', id: invitation.id });
    return { secret, invitation };
  });
}

/** The account's invitations still waiting to be accepted (never their links), newest first. */
export async function listInvitations(deps: Pick<Deps, 'store'>, accountId: string) {
  return listPendingInvitations(deps.store.db, accountId);
}

/**
 * Revokes a pending invitation: its link stops working at once. Never one whose role is above the
 * revoker's (as for tokens and members): an admin does not undo an owner's choice of another owner.
 */
export async function revokeInvitation(
  deps: Pick<Deps, 'store'>,
  revoker: Actor & { role: Role },
  invitationId: string,
) {
  await deps.store.db.transaction().execute(async (trx) => {
    const invitation = await findPendingInvitation(trx, revoker.accountId, invitationId);
    if (!invitation) throw new NotFoundError('Invitation');
    if (!roleAtLeast(revoker.role, invitation.role)) {
      throw new ForbiddenError(
        `Revoking an invitation with the ${invitation.role} role needs the ${invitation.role} role`,
      );
    }
    await deleteInvitation(trx, invitationId);
    await recordAudit(trx, revoker, 'invitation.revoke', { type: 'invitation', id: invitationId });
  });
}

/**
 * Accepts an invitation: once, before it expires. A new user is made with the password given; a user who
 * has a password already must give it (the link alone, which the inviter saw, never takes over a person).
 */
export async function acceptInvitation(
  deps: Pick<Deps, 'store'>,
  call: SignInCall,
  input: { token: string; password: string; display_name?: string | undefined },
) {
  const refused = 'This invitation is unknown, accepted already, revoked or expired';
  return deps.store.db.transaction().execute(async (trx) => {
    const invitation = await acceptInvitationRow(trx, hashSecret(input.token));
    if (!invitation) throw new UnauthorizedError(refused);
    let user = await findUserByEmail(trx, invitation.email);
    if (user?.password_hash) {
      if (!(await passwordMatches(user.password_hash, input.password))) throw new UnauthorizedError(WRONG);
    } else {
      const problem = passwordProblem(input.password, invitation.email);
      if (problem) throw ValidationError.fields([problem]);
      user ??= await insertUser(trx, {
        id: randomUUID(),
        email: invitation.email,
        display_name: input.display_name ?? invitation.email.split('@')[0] ?? invitation.email,
      });
      await setPasswordHash(trx, user.id, await hashPassword(input.password));
    }
    // An invitation still pending when its person became a member (another invitation, the operator)
    // must not change that membership: a stale viewer one would demote an owner, even the last.
    await joinUnlessMember(trx, {
      user_id: user.id,
      account_id: invitation.account_id,
      role: invitation.role,
    });
    return startSession(trx, call, user, invitation.account_id, 'invitation.accept');
  });
}
