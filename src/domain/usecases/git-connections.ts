/**
 * Git connections: an account's credential for a git host and its webhook secret, managed by the
 * operator (/admin/v1). Secrets are sealed before they reach the table and never read back.
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import { findAccount } from '../../store/repositories/accounts.ts';
import {
  deleteGitConnection,
  findGitConnection,
  findGitConnectionById,
  insertGitConnection,
  listGitConnections,
  servicesUsingConnection,
  updateGitConnection,
} from '../../store/repositories/git-connections.ts';
import type { GitConnectionRow } from '../../store/schema.ts';
import { ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import {
  checkGitConnection,
  checkGitConnectionChange,
  DEFAULT_GIT_BASE_URLS,
  normalBaseUrl,
} from '../git-connection-rules.ts';
import type { GitConnectionChange, GitConnectionInput } from '../inputs.ts';
import { recordAudit } from './audit.ts';
import type { Call, Deps } from './context.ts';

const operator = (accountId: string, call: Call) => ({ accountId, tokenId: null, ...call });

export async function createGitConnection(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  call: Call,
  accountId: string,
  input: GitConnectionInput,
): Promise<GitConnectionRow> {
  if (!(await findAccount(deps.store.db, accountId))) throw new NotFoundError('Account');
  const errors = checkGitConnection(input);
  if (errors.length > 0) throw ValidationError.fields(errors);
  const base = normalBaseUrl(input.base_url ?? DEFAULT_GIT_BASE_URLS[input.kind]);
  const app = input.token === undefined;
  return deps.store.db.transaction().execute(async (trx) => {
    const connection = await insertGitConnection(trx, {
      id: randomUUID(),
      account_id: accountId,
      kind: input.kind,
      name: input.name,
      base_url: 'url' in base ? base.url : '',
      credential: app ? 'github_app' : 'token',
      github_app_id: app ? (input.github_app_id ?? null) : null,
      github_installation_id: app ? (input.github_installation_id ?? null) : null,
      secret_sealed: deps.secretBox.seal((app ? input.private_key : input.token) ?? ''),
      webhook_secret_sealed: deps.secretBox.seal(input.webhook_secret),
    });
    await recordAudit(trx, operator(accountId, call), 'git_connection.create', { id: connection.id });
    return connection;
  });
}

export async function listAccountGitConnections(deps: Pick<Deps, 'store'>, accountId: string) {
  if (!(await findAccount(deps.store.db, accountId))) throw new NotFoundError('Account');
  return listGitConnections(deps.store.db, accountId);
}

/**
 * Rotates a connection's secrets (or renames it) in place, so the services using it keep their
 * installation_id: a token connection takes a token, an App connection a private key.
 */
export async function changeGitConnection(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  call: Call,
  id: string,
  change: GitConnectionChange,
): Promise<GitConnectionRow> {
  return deps.store.db.transaction().execute(async (trx) => {
    const connection = await findGitConnectionById(trx, id, { forUpdate: true });
    if (!connection) throw new NotFoundError('Connection');
    const app = connection.credential === 'github_app';
    const errors = checkGitConnectionChange(connection.credential, change);
    if (errors.length > 0) throw ValidationError.fields(errors);
    const secret = app ? change.private_key : change.token;
    const updated = await updateGitConnection(trx, id, {
      ...(change.name !== undefined && { name: change.name }),
      ...(secret !== undefined && { secret_sealed: deps.secretBox.seal(secret) }),
      ...(change.webhook_secret !== undefined && {
        webhook_secret_sealed: deps.secretBox.seal(change.webhook_secret),
      }),
    });
    await recordAudit(trx, operator(connection.account_id, call), 'git_connection.update', { id });
    return updated;
  });
}

/** Refused (409) while a live service clones with it: its next deployment would fail. */
export async function removeGitConnection(deps: Pick<Deps, 'store'>, call: Call, id: string): Promise<void> {
  await deps.store.db.transaction().execute(async (trx) => {
    // Locked first: a service naming it meanwhile (share lock) commits before the count, or finds none.
    const connection = await findGitConnectionById(trx, id, { forUpdate: true });
    if (!connection) throw new NotFoundError('Connection');
    const users = await servicesUsingConnection(trx, id);
    if (users > 0) {
      throw new ConflictError(
        `Connection is used by ${users} service(s): point them at another connection (installation_id) first`,
      );
    }
    await deleteGitConnection(trx, id);
    await recordAudit(trx, operator(connection.account_id, call), 'git_connection.delete', { id });
  });
}

/**
 * A service's `installation_id` must name a connection of its account and of its source's host kind;
 * anything else is the spec's 404 `Connection not found` (another account's connection is not found).
 */
export async function assertConnection(
  db: Db,
  spec: { account_id: string; source: string; installation_id: string | null },
): Promise<void> {
  if (spec.installation_id === null) return;
  const connection = await findGitConnection(db, spec.account_id, spec.installation_id);
  if (!connection || connection.kind !== spec.source) throw new NotFoundError('Connection');
}
