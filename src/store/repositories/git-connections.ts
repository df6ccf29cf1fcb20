import type { Insertable } from 'kysely';
import type { HookRouting } from '../../domain/git-events.ts';
import type { Db } from '../database.ts';
import type { GitConnectionRow, GitConnectionsTable, GitKind, ServiceRow } from '../schema.ts';

export async function insertGitConnection(
  db: Db,
  row: Insertable<GitConnectionsTable>,
): Promise<GitConnectionRow> {
  return db.insertInto('git_connections').values(row).returningAll().executeTakeFirstOrThrow();
}

/**
 * A connection of the account (another account's is simply not found), share-locked for the
 * transaction: a service that names it commits before the connection can be deleted, or not at all.
 */
export async function findGitConnection(
  db: Db,
  accountId: string,
  id: string,
): Promise<GitConnectionRow | undefined> {
  return db
    .selectFrom('git_connections')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .forShare()
    .executeTakeFirst();
}

export async function findGitConnectionById(
  db: Db,
  id: string,
  options: { forUpdate?: boolean } = {},
): Promise<GitConnectionRow | undefined> {
  let q = db.selectFrom('git_connections').selectAll().where('id', '=', id);
  if (options.forUpdate) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function listGitConnections(db: Db, accountId: string): Promise<GitConnectionRow[]> {
  return db
    .selectFrom('git_connections')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

/** The connection of a kind with that id: a delivery to `/hooks/{kind}/{id}` is checked against it alone. */
export async function gitConnectionOfKind(
  db: Db,
  kind: GitKind,
  id: string,
): Promise<GitConnectionRow | undefined> {
  return db
    .selectFrom('git_connections')
    .selectAll()
    .where('id', '=', id)
    .where('kind', '=', kind)
    .executeTakeFirst();
}

/**
 * The connections a delivery to `/hooks/{kind}` can belong to, found by index before any signature is
 * checked: a GitHub App's deliveries name its installation (its ping, the App); a repository webhook's, the repository, and
 * then it is a connection of an account with a live service of that kind on it (naming that connection,
 * or none). The oldest `limit` of them, so an unauthenticated delivery costs at most that many checks.
 */
export async function hookCandidates(
  db: Db,
  kind: GitKind,
  named: HookRouting,
  limit: number,
): Promise<GitConnectionRow[]> {
  let q = db.selectFrom('git_connections as c').selectAll('c').where('c.kind', '=', kind);
  if ('installationId' in named) {
    q = q.where('c.github_installation_id', '=', named.installationId);
  } else if ('appId' in named) {
    q = q.where('c.github_app_id', '=', named.appId);
  } else {
    q = q.where(({ exists, selectFrom }) =>
      exists(
        selectFrom('services as s')
          .select('s.id')
          .where('s.source', '=', kind)
          .where((eb) => eb.fn('lower', ['s.git_repo_full_name']), '=', named.repo.toLowerCase())
          .where('s.is_deleted', '=', false)
          .whereRef('s.account_id', '=', 'c.account_id')
          .where((eb) =>
            eb.or([eb('s.installation_id', 'is', null), eb('s.installation_id', '=', eb.ref('c.id'))]),
          ),
      ),
    );
  }
  return q.orderBy('c.created_at').orderBy('c.id').limit(limit).execute();
}

export async function updateGitConnection(
  db: Db,
  id: string,
  patch: Partial<Pick<GitConnectionRow, 'name' | 'secret_sealed' | 'webhook_secret_sealed'>>,
): Promise<GitConnectionRow> {
  return db
    .updateTable('git_connections')
    .set({ ...patch, updated_at: new Date() })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deleteGitConnection(db: Db, id: string): Promise<boolean> {
  const result = await db.deleteFrom('git_connections').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** Live services that clone with the connection. */
export async function servicesUsingConnection(db: Db, id: string): Promise<number> {
  const row = await db
    .selectFrom('services')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('installation_id', '=', id)
    .where('is_deleted', '=', false)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Records a webhook delivery; false when it was recorded before (a redelivery). Written in the
 * transaction of what the delivery does, so a delivery that failed half-way is not marked done.
 */
export async function recordDelivery(
  db: Db,
  delivery: { connectionId: string; deliveryId: string; event: string },
): Promise<boolean> {
  const inserted = await db
    .insertInto('git_deliveries')
    .values({ connection_id: delivery.connectionId, delivery_id: delivery.deliveryId, event: delivery.event })
    .onConflict((oc) => oc.columns(['connection_id', 'delivery_id']).doNothing())
    .returning('delivery_id')
    .executeTakeFirst();
  return inserted !== undefined;
}

/**
 * The account's live, non-preview services of a git source on a repository and branch (the repository
 * name compared without case, as hosts do), cloned anonymously or with the given connection.
 */
export async function servicesOnBranch(
  db: Db,
  match: { accountId: string; source: GitKind; repo: string; branch: string; connectionId: string },
): Promise<ServiceRow[]> {
  return db
    .selectFrom('services')
    .selectAll()
    .where('account_id', '=', match.accountId)
    .where('source', '=', match.source)
    .where((eb) => eb.fn('lower', ['git_repo_full_name']), '=', match.repo.toLowerCase())
    .where('git_repo_branch', '=', match.branch)
    .where('is_deleted', '=', false)
    .where('is_preview', '=', false)
    .where((eb) => eb.or([eb('installation_id', 'is', null), eb('installation_id', '=', match.connectionId)]))
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}
