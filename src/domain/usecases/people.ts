/**
 * Users, memberships and the tokens people make (docs/access.md). The operator creates users and sets
 * memberships through the admin API; members with the admin role make, list and revoke the account's
 * tokens through /v1/tokens. Every change of who may do what tells every process at once (`access`).
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import { accessKey, notify } from '../../store/notifications.ts';
import {
  findAccount,
  insertApiToken,
  listPeopleTokens,
  lockLiveAccountToken,
  revokeAccountToken,
} from '../../store/repositories/accounts.ts';
import { listEnvironments } from '../../store/repositories/environments.ts';
import { endSessionsIn } from '../../store/repositories/sessions.ts';
import {
  deleteMembership,
  findMembership,
  findUser,
  findUserByEmail,
  insertUser,
  upsertMembership,
} from '../../store/repositories/users.ts';
import { hashApiToken, newApiToken } from '../api-token.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../errors.ts';
import type { MembershipInput, NewToken, NewUser } from '../inputs.ts';
import { type Role, roleAtLeast, tokenActsWith } from '../roles.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Call, Deps } from './context.ts';

/** The operator acting on a member: the audit entry names the member. */
const about = (accountId: string, call: Call, user: { id: string; email: string } | undefined): Actor => ({
  accountId,
  tokenId: null,
  userId: user?.id ?? null,
  userEmail: user?.email ?? null,
  ...call,
});

export async function createUser(deps: Pick<Deps, 'store'>, input: NewUser) {
  return deps.store.db.transaction().execute(async (trx) => {
    if (await findUserByEmail(trx, input.email)) {
      throw new ConflictError(`A user with the email ${input.email} exists already`);
    }
    return insertUser(trx, { id: randomUUID(), email: input.email, display_name: input.display_name });
  });
}

/** 422 on `environment_ids` unless each names one of the account's environments. */
async function checkEnvironments(db: Db, accountId: string, ids: readonly string[] | null | undefined) {
  if (!ids) return;
  const known = new Set((await listEnvironments(db, accountId)).map((e) => e.id));
  const unknown = ids.find((id) => !known.has(id));
  if (unknown !== undefined) {
    throw ValidationError.fields([
      {
        field: 'environment_ids',
        error: `environment_ids names ${unknown}, not an environment of this account`,
      },
    ]);
  }
}

/** What the operator does first when refused the last owner's removal or demotion. */
const operatorMakesOwner = (accountId: string) =>
  `make another owner first: PUT /admin/v1/accounts/${accountId}/members/{userId} with {"role": "owner"} ` +
  `(berth admin users add ${accountId} <userId> --role owner)`;
/** What a member does first: invite another owner, or ask the operator for one. */
const membersMakeOwner = () => 'make another owner first';

/**
 * The account keeps at least one owner: 409 when the member `userId` is its last owner and would stop
 * being one (`becomes` null: removed). The owners' memberships stay locked to the end of the transaction,
 * so two removals or demotions of the last two owners, at once, cannot both pass.
 */
async function keepAnOwner(
  trx: Db,
  accountId: string,
  userId: string,
  becomes: Role | null,
  fix: (accountId: string) => string,
): Promise<void> {
  if (becomes === 'owner') return;
  const owners = await trx
    .selectFrom('memberships')
    .select('user_id')
    .where('account_id', '=', accountId)
    .where('role', '=', 'owner')
    .forUpdate()
    .execute();
  if (owners.length === 1 && owners[0]?.user_id === userId) {
    throw new ConflictError(`The account keeps at least one owner: ${fix(accountId)}`);
  }
}

/** Makes a user a member of an account with a role (and scope), or changes their role. */
export async function setMembership(
  deps: Pick<Deps, 'store'>,
  call: Call,
  accountId: string,
  userId: string,
  input: MembershipInput,
) {
  return deps.store.db.transaction().execute(async (trx) => {
    if (!(await findAccount(trx, accountId))) throw new NotFoundError('Account');
    const user = await findUser(trx, userId);
    if (!user) throw new NotFoundError('User');
    await keepAnOwner(trx, accountId, userId, input.role, operatorMakesOwner);
    await checkEnvironments(trx, accountId, input.environment_ids);
    const membership = await upsertMembership(trx, {
      user_id: userId,
      account_id: accountId,
      role: input.role,
      environment_ids: input.environment_ids ?? null,
    });
    await recordAudit(trx, about(accountId, call, user), 'member.set', {
      type: 'user',
      id: userId,
    });
    // A lowered role or a narrower scope holds for the member's tokens at once, in every process.
    await notify(trx, 'access', accessKey('account', accountId));
    return membership;
  });
}

/**
 * Ends a membership: the member's tokens and sessions in the account stop working, and their open streams
 * close, in every process, at once.
 */
export async function removeMembership(
  deps: Pick<Deps, 'store'>,
  call: Call,
  accountId: string,
  userId: string,
) {
  await deps.store.db.transaction().execute(async (trx) => {
    await keepAnOwner(trx, accountId, userId, null, operatorMakesOwner);
    if (!(await deleteMembership(trx, accountId, userId))) throw new NotFoundError('Member');
    await endSessionsIn(trx, accountId, userId);
    const user = await findUser(trx, userId);
    await recordAudit(trx, about(accountId, call, user), 'member.remove', {
      type: 'user',
      id: userId,
    });
    await notify(trx, 'access', accessKey('account', accountId));
  });
}

/** A token of a member, issued by the operator (what a member starts from until people sign in). */
export async function issueMemberToken(
  deps: Pick<Deps, 'store'>,
  call: Call,
  accountId: string,
  userId: string,
) {
  return deps.store.db.transaction().execute(async (trx) => {
    const membership = await findMembership(trx, accountId, userId);
    if (!membership) throw new NotFoundError('Member');
    const user = await findUser(trx, userId);
    const token = newApiToken();
    const tokenId = randomUUID();
    await insertApiToken(trx, {
      id: tokenId,
      account_id: accountId,
      token_hash: hashApiToken(token),
      name: 'issued by the operator',
      role: membership.role,
      owner_user_id: userId,
    });
    await recordAudit(trx, about(accountId, call, user), 'api_token.create', { id: tokenId });
    return { api_token: token, token_id: tokenId };
  });
}

/** What a caller making a token holds: its role, and the person (if any) the new token belongs to. */
export interface TokenMaker extends Actor {
  role: Role;
}

/**
 * A token made by a member (or with an operator token): its role at most the maker's (else 422 on
 * `role`), its environments the account's. Shown once, here.
 */
export async function createToken(deps: Pick<Deps, 'store'>, maker: TokenMaker, input: NewToken) {
  if (!roleAtLeast(maker.role, input.role)) {
    throw ValidationError.fields([
      { field: 'role', error: `role cannot be higher than your own role (${maker.role})` },
    ]);
  }
  const expiresAt = input.expires_at ? new Date(input.expires_at) : null;
  if (expiresAt && expiresAt.getTime() <= Date.now()) {
    throw ValidationError.fields([{ field: 'expires_at', error: 'expires_at must be in the future' }]);
  }
  return deps.store.db.transaction().execute(async (trx) => {
    await checkEnvironments(trx, maker.accountId, input.environment_ids);
    const token = newApiToken();
    const id = randomUUID();
    await insertApiToken(trx, {
      id,
      account_id: maker.accountId,
      token_hash: hashApiToken(token),
      name: input.name,
      role: input.role,
      owner_user_id: maker.userId ?? null,
      environment_ids: input.environment_ids ?? null,
      read_only: input.read_only ?? false,
      expires_at: expiresAt,
    });
    await recordAudit(trx, maker, 'api_token.create', { id });
    return { token, id };
  });
}

/**
 * The account's tokens, each with the role and environments it acts with now: a person's token never
 * does more than its owner's membership (as authentication holds it), so a lowered member's is listed lower.
 */
export async function listTokens(deps: Pick<Deps, 'store'>, accountId: string) {
  const rows = await listPeopleTokens(deps.store.db, accountId);
  return rows.map(({ member_role, member_environment_ids, ...token }) => {
    const acts = tokenActsWith(token, { role: member_role, environment_ids: member_environment_ids });
    return { ...token, role: acts.role, environment_ids: acts.environments && [...acts.environments] };
  });
}

/**
 * Revokes one of the account's tokens; every process refuses it within a second (`access`). Never one
 * whose role is above the revoker's (as for removing a member): an admin cannot lock the owner out.
 */
export async function revokeTokenOf(
  deps: Pick<Deps, 'store'>,
  actor: Actor & { role: Role },
  tokenId: string,
) {
  await deps.store.db.transaction().execute(async (trx) => {
    const token = await lockLiveAccountToken(trx, actor.accountId, tokenId);
    if (!token) throw new NotFoundError('Token');
    // The role it acts with, as GET /v1/tokens lists it: a lowered member's token no longer outranks an admin.
    const { role } = tokenActsWith(
      { role: token.role, environment_ids: null },
      { role: token.member_role, environment_ids: null },
    );
    if (!roleAtLeast(actor.role, role)) {
      throw new ForbiddenError(
        `Revoking a token with the ${role} role needs the ${role} role: an ${actor.role} cannot lock the ${role} out`,
      );
    }
    await revokeAccountToken(trx, actor.accountId, tokenId);
    await recordAudit(trx, actor, 'api_token.revoke', { id: tokenId });
    await notify(trx, 'access', accessKey('token', tokenId));
  });
}

/**
 * A member with the admin role removes another member (never one whose role is above theirs, never the
 * account's last owner). Their tokens and sessions end and their streams close, in every process.
 */
export async function removeMemberBy(
  deps: Pick<Deps, 'store'>,
  remover: Actor & { role: Role },
  userId: string,
) {
  await deps.store.db.transaction().execute(async (trx) => {
    const membership = await findMembership(trx, remover.accountId, userId);
    if (!membership) throw new NotFoundError('Member');
    if (!roleAtLeast(remover.role, membership.role)) {
      throw new ForbiddenError(
        `Removing a member with the ${membership.role} role needs the ${membership.role} role`,
      );
    }
    await keepAnOwner(trx, remover.accountId, userId, null, membersMakeOwner);
    await deleteMembership(trx, remover.accountId, userId);
    await endSessionsIn(trx, remover.accountId, userId);
    await recordAudit(trx, remover, 'member.remove', { type: 'user', id: userId });
    await notify(trx, 'access', accessKey('account', remover.accountId));
  });
}
