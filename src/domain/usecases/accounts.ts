/**
 * Operator actions behind /admin/v1. Each is audited on the account it touches, actor `Operator`.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { accessKey, notify } from '../../store/notifications.ts';
import {
  findAccount,
  insertAccount,
  insertApiToken,
  listApiTokens,
  revokeToken,
  updateAccount,
} from '../../store/repositories/accounts.ts';
import { listEnvironments } from '../../store/repositories/environments.ts';
import { sealedPasswordByArn } from '../../store/repositories/resources.ts';
import type { AccountRow } from '../../store/schema.ts';
import { hashApiToken, newApiToken } from '../api-token.ts';
import { NotFoundError } from '../errors.ts';
import type { AccountChange, NewAccount } from '../inputs.ts';
import { recordAudit } from './audit.ts';
import type { Call, Deps } from './context.ts';

const operator = (accountId: string, call: Call) => ({ accountId, tokenId: null, ...call });

export async function createAccount(
  deps: Pick<Deps, 'store'>,
  call: Call,
  input: NewAccount,
): Promise<AccountRow> {
  return deps.store.db.transaction().execute(async (trx) => {
    const account = await insertAccount(trx, {
      id: randomUUID(),
      name: input.name,
      plan: input.plan ?? 'starter',
      features: input.features ?? [],
    });
    await recordAudit(trx, operator(account.id, call), 'account.create', { id: account.id });
    return account;
  });
}

export async function changeAccount(
  deps: Pick<Deps, 'store'>,
  call: Call,
  id: string,
  patch: AccountChange,
): Promise<AccountRow> {
  return deps.store.db.transaction().execute(async (trx) => {
    const account = await updateAccount(trx, id, patch);
    if (!account) throw new NotFoundError('Account');
    await recordAudit(trx, operator(id, call), 'account.update', { id });
    // Its plan may no longer allow reading: every process looks again at the account's open streams.
    await notify(trx, 'access', accessKey('account', id));
    return account;
  });
}

/** Issues an API token. The token itself is returned here and never again; only its hash is stored. */
export async function issueApiToken(deps: Pick<Deps, 'store'>, call: Call, accountId: string) {
  return deps.store.db.transaction().execute(async (trx) => {
    if (!(await findAccount(trx, accountId))) throw new NotFoundError('Account');
    const token = newApiToken();
    const tokenId = randomUUID();
    await insertApiToken(trx, { id: tokenId, account_id: accountId, token_hash: hashApiToken(token) });
    await recordAudit(trx, operator(accountId, call), 'api_token.create', { id: tokenId });
    return { api_token: token, token_id: tokenId };
  });
}

export async function revokeApiToken(deps: Pick<Deps, 'store'>, call: Call, tokenId: string): Promise<void> {
  await deps.store.db.transaction().execute(async (trx) => {
    const token = await revokeToken(trx, tokenId);
    if (!token) throw new NotFoundError('API token');
    await recordAudit(trx, operator(token.account_id, call), 'api_token.revoke', { id: tokenId });
    // Every process ends the token's open streams and forgets it.
    await notify(trx, 'access', accessKey('token', tokenId));
  });
}

/** An account's API tokens (revoked ones too, with when), oldest first; 404 for an unknown account. */
export async function listAccountTokens(deps: Deps, accountId: string) {
  if (!(await findAccount(deps.store.db, accountId))) throw new NotFoundError('Account');
  return listApiTokens(deps.store.db, accountId);
}

/** An account's environments (deleted ones left out), oldest first; 404 for an unknown account. */
export async function listAccountEnvironments(deps: Deps, accountId: string) {
  if (!(await findAccount(deps.store.db, accountId))) throw new NotFoundError('Account');
  return listEnvironments(deps.store.db, accountId);
}

/**
 * The password a dependency's `$passwordArn` names, read back by the operator. Each read is audited on
 * the service's account (`dependency_password.read`, the service as its subject): a password leaving
 * Berth is an event its owners can see.
 */
export async function readDependencyPassword(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  call: Call,
  arn: string,
): Promise<string> {
  return deps.store.db.transaction().execute(async (trx) => {
    const found = await sealedPasswordByArn(trx, arn);
    if (!found) throw new NotFoundError('Dependency password');
    await recordAudit(trx, operator(found.account_id, call), 'dependency_password.read', {
      type: 'service',
      id: found.service_id,
      environmentId: found.environment_id,
    });
    return deps.secretBox.open(found.sealed);
  });
}
