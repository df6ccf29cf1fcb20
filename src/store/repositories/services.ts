import { sql } from 'kysely';
import { DELETE_STATES, type ServiceState } from '../../domain/service-states.ts';
import { compiled } from '../compiled.ts';
import type { Db } from '../database.ts';
import { changedSince, EVENT_SOURCES, eventState, inTransaction, recordEvents } from '../events.ts';
import type { NewService, ServiceRow, ServiceUpdate } from '../schema.ts';
import { type Page, pageAfter } from './paging.ts';

export async function insertService(db: Db, row: NewService): Promise<ServiceRow> {
  return inTransaction(db, async (trx) => {
    const service = await trx.insertInto('services').values(row).returningAll().executeTakeFirstOrThrow();
    await recordEvents(trx, 'service', 'created', [service]);
    return service;
  });
}

/**
 * The services `where` picks, locked, as `before` (their id and event state): an update joining it
 * on `before_id` knows which rows it changed (changedSince).
 */
function lockedServices(
  db: Db,
  where: (q: ReturnType<typeof servicesTable>) => ReturnType<typeof servicesTable>,
) {
  return where(servicesTable(db))
    .select(['id as before_id', eventState('service', 'services').as('before_state')])
    .forNoKeyUpdate()
    .as('before');
}
const servicesTable = (db: Db) => db.selectFrom('services');

/** Records an `updated` event for each returned row that changed more than `updated_at`. */
async function recordChanged(
  db: Db,
  rows: Array<Record<string, unknown> & { changed: boolean }>,
): Promise<void> {
  await recordEvents(
    db,
    'service',
    'updated',
    rows.filter((r) => r.changed),
  );
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
  return (options.forUpdate ? serviceForUpdate : serviceById).executeTakeFirst(db, { id });
}
const serviceById = compiled((db, { id }: { id: string }) =>
  db.selectFrom('services').selectAll().where('id', '=', id),
);
const serviceForUpdate = compiled((db, { id }: { id: string }) =>
  db.selectFrom('services').selectAll().where('id', '=', id).forUpdate(),
);

/** Changes a service's fields; its state changes only through transitionService. */
export async function updateService(
  db: Db,
  id: string,
  patch: Omit<ServiceUpdate, 'state'>,
): Promise<ServiceRow> {
  return inTransaction(db, async (trx) => {
    const row = await trx
      .updateTable('services')
      .from(lockedServices(trx, (q) => q.where('id', '=', id)))
      .set({ ...patch, updated_at: new Date() })
      .whereRef('services.id', '=', 'before.before_id')
      .returningAll('services')
      .returning(changedSince('service', 'services').as('changed'))
      .executeTakeFirstOrThrow();
    await recordChanged(trx, [row]);
    const { changed: _, ...service } = row;
    return service;
  });
}

/**
 * Moves a service to `to` only from one of the states `from`, in the one statement (UPDATE ... WHERE
 * state IN from): a stale or repeated caller cannot move it from anywhere else. False, and nothing
 * written, when the service is in another state.
 */
export async function transitionService(
  db: Db,
  id: string,
  from: readonly ServiceState[],
  to: ServiceState,
  extra: Omit<ServiceUpdate, 'state'> = {},
): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const set = { ...extra, state: to, updated_at: new Date() };
    const row = await moveService.executeTakeFirst(trx, { id, from, set });
    if (!row) return false;
    await recordChanged(trx, [row]);
    return true;
  });
}
/** The row comes back with the columns its event keeps, not whole (a services row has ~60). */
const moveService = compiled(
  (trx, v: { id: string; from: readonly ServiceState[]; set: ServiceUpdate & { state: ServiceState } }) =>
    trx
      .updateTable('services')
      .from(lockedServices(trx, (q) => q.where('id', '=', v.id).where('state', 'in', v.from)))
      .set(v.set)
      .whereRef('services.id', '=', 'before.before_id')
      .returning(EVENT_SOURCES.service.columns.map((c) => `services.${c}` as const))
      .returning(changedSince('service', 'services').as('changed')),
);

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
  await inTransaction(db, async (trx) => {
    if (provisioned) {
      // One statement: what was provisioned is always written, the state only as below.
      const rows = await trx
        .updateTable('services')
        .from(lockedServices(trx, (q) => q.where('id', '=', serviceId)))
        .set({
          ...provisioned,
          state: sql<ServiceState>`CASE WHEN services.latest_deployment_id = ${deploymentId}
            AND services.state NOT IN (${sql.join(DELETE_STATES)}) THEN ${state} ELSE services.state END`,
          updated_at: new Date(),
        })
        .whereRef('services.id', '=', 'before.before_id')
        .returningAll('services')
        .returning(changedSince('service', 'services').as('changed'))
        .execute();
      await recordChanged(trx, rows);
      return;
    }
    const rows = await trx
      .updateTable('services')
      .from(
        lockedServices(trx, (q) =>
          q
            .where('id', '=', serviceId)
            .where('latest_deployment_id', '=', deploymentId)
            .where('state', 'not in', DELETE_STATES),
        ),
      )
      .set({ state, updated_at: new Date() })
      .whereRef('services.id', '=', 'before.before_id')
      .returningAll('services')
      .returning(changedSince('service', 'services').as('changed'))
      .execute();
    await recordChanged(trx, rows);
  });
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
