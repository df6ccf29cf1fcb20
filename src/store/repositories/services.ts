import { sql } from 'kysely';
import { DELETE_STATES, type ServiceState } from '../../domain/service-states.ts';
import type { Db } from '../database.ts';
import type { NewService, ServiceRow, ServiceUpdate } from '../schema.ts';
import { type Page, pageAfter } from './paging.ts';

export async function insertService(db: Db, row: NewService): Promise<ServiceRow> {
  return db.insertInto('services').values(row).returningAll().executeTakeFirstOrThrow();
}

/**
 * In use by any live service of any environment: environments may share an ingress host (a
 * provider's), where a subdomain must name one service only.
 */
export async function subdomainTaken(db: Db, subdomain: string): Promise<boolean> {
  const row = await db
    .selectFrom('services')
    .select('id')
    .where('subdomain', '=', subdomain)
    .where('is_deleted', '=', false)
    .executeTakeFirst();
  return row !== undefined;
}

export async function findServiceById(db: Db, id: string, options: { forUpdate?: boolean } = {}) {
  let q = db.selectFrom('services').selectAll().where('id', '=', id);
  if (options.forUpdate) q = q.forUpdate();
  return q.executeTakeFirst();
}

/** Changes a service's fields; its state changes only through transitionService. */
export async function updateService(
  db: Db,
  id: string,
  patch: Omit<ServiceUpdate, 'state'>,
): Promise<ServiceRow> {
  return db
    .updateTable('services')
    .set({ ...patch, updated_at: new Date() })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Moves a service to `to` only from one of the states `from`, in the one statement (UPDATE ... WHERE
 * state IN from): a stale or repeated caller cannot move it from anywhere else. Undefined, and nothing
 * written, when the service is in another state.
 */
export async function transitionService(
  db: Db,
  id: string,
  from: readonly ServiceState[],
  to: ServiceState,
  extra: Omit<ServiceUpdate, 'state'> = {},
): Promise<ServiceRow | undefined> {
  return db
    .updateTable('services')
    .set({ ...extra, state: to, updated_at: new Date() })
    .where('id', '=', id)
    .where('state', 'in', from)
    .returningAll()
    .executeTakeFirst();
}

export async function listServices(db: Db, environmentId: string, page: Page) {
  return pageAfter(
    db
      .selectFrom('services')
      .selectAll()
      .where('environment_id', '=', environmentId)
      .where('is_deleted', '=', false),
    'services',
    page,
  );
}

export async function findPreview(
  db: Db,
  parentId: string,
  prNumber: number,
): Promise<ServiceRow | undefined> {
  return db
    .selectFrom('services')
    .selectAll()
    .where('parent_service_id', '=', parentId)
    .where('pr_number', '=', prNumber)
    .where('is_preview', '=', true)
    .where('is_deleted', '=', false)
    .executeTakeFirst();
}

/**
 * A deployment's effect on its service. The state follows only the service's latest deployment (an
 * older one finishing while a newer one waits leaves `deploy_queued` alone) and never overwrites a
 * delete under way; what the provider provisioned is recorded whichever deployment brought it.
 */
export async function followDeployment(
  db: Db,
  serviceId: string,
  deploymentId: string,
  state: ServiceState,
  provisioned?: { namespace_name: string; kube_svc_alias: string },
): Promise<void> {
  if (provisioned) {
    // One statement: what was provisioned is always written, the state only as below.
    await db
      .updateTable('services')
      .set({
        ...provisioned,
        state: sql<ServiceState>`CASE WHEN latest_deployment_id = ${deploymentId}
          AND state NOT IN (${sql.join(DELETE_STATES)}) THEN ${state} ELSE state END`,
        updated_at: new Date(),
      })
      .where('id', '=', serviceId)
      .execute();
    return;
  }
  await db
    .updateTable('services')
    .set({ state, updated_at: new Date() })
    .where('id', '=', serviceId)
    .where('latest_deployment_id', '=', deploymentId)
    .where('state', 'not in', DELETE_STATES)
    .execute();
}

/** A git service's ops config as a deployment read it from the repository (GET service reports it). */
export async function recordRepoOps(db: Db, serviceId: string, ops: string): Promise<void> {
  await db
    .updateTable('services')
    .set({ repo_ops: ops })
    .where('id', '=', serviceId)
    .where('repo_ops', 'is distinct from', ops)
    .execute();
}
