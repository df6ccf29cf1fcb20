import {
  type Expression,
  type ExpressionBuilder,
  type Insertable,
  type SqlBool,
  sql,
  type Updateable,
} from 'kysely';
import type { ServiceState } from '../../domain/service-states.ts';
import { DELETE_STATES } from '../../domain/service-states.ts';
import type { DeployedSource } from '../../providers/provider.ts';
import type { Db } from '../database.ts';
import { changedSince, eventState, inTransaction, recordEvents, setsEventColumns } from '../events.ts';
import { notify } from '../notifications.ts';
import type {
  Database,
  DeploymentRow,
  DeploymentsTable,
  EnvironmentRow,
  SecretRow,
  ServiceResourceRow,
  ServiceRow,
} from '../schema.ts';
import type { Fence } from './jobs.ts';
import type { Observation } from './observations.ts';
import { type Page, pageAfter } from './paging.ts';
import { type AsJson, withDates } from './scope.ts';

/** Inserts a deployment; with it, the state of the one it follows (`prev_deployment_id`), read in the same statement. */
export async function insertDeployment(
  db: Db,
  row: Insertable<DeploymentsTable>,
): Promise<{ deployment: DeploymentRow; previousState: DeploymentRow['state'] | null }> {
  return inTransaction(db, async (trx) => {
    const { previous_state, ...deployment } = await trx
      .insertInto('deployments')
      .values(row)
      .returningAll()
      .returning((eb) =>
        eb
          .selectFrom('deployments as p')
          .select('p.state')
          .whereRef('p.id', '=', 'deployments.prev_deployment_id')
          .as('previous_state'),
      )
      .executeTakeFirstOrThrow();
    await recordEvents(trx, 'deployment', 'created', [deployment]);
    return { deployment, previousState: previous_state };
  });
}

type Where = (eb: ExpressionBuilder<Database, 'deployments'>) => Expression<SqlBool>;

/**
 * Updates the deployments `where` picks (locked first) with `set`, recording an `updated` event for
 * each whose event state changed; how many it updated.
 */
async function updateDeployments(db: Db, where: Where, set: Updateable<DeploymentsTable>): Promise<number> {
  if (!setsEventColumns('deployment', set)) {
    // No event can come of it: no transaction of its own, no lock but the update's.
    const result = await db.updateTable('deployments').set(set).where(where).executeTakeFirst();
    return Number(result.numUpdatedRows);
  }
  return inTransaction(db, async (trx) => {
    const rows = await trx
      .updateTable('deployments')
      .from(
        trx
          .selectFrom('deployments')
          .where(where)
          .select(['id as before_id', eventState('deployment', 'deployments').as('before_state')])
          .forNoKeyUpdate()
          .as('before'),
      )
      .set(set)
      .whereRef('deployments.id', '=', 'before.before_id')
      .returningAll('deployments')
      .returning(changedSince('deployment', 'deployments').as('changed'))
      .execute();
    await recordEvents(
      trx,
      'deployment',
      'updated',
      rows.filter((r) => r.changed),
    );
    return rows.length;
  });
}

/** Scoped to the account: one lookup by primary key. */
export async function findDeployment(
  db: Db,
  accountId: string,
  id: string,
): Promise<DeploymentRow | undefined> {
  return db
    .selectFrom('deployments')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

export async function findDeploymentById(db: Db, id: string): Promise<DeploymentRow | undefined> {
  return db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * A deployment to run, with its service and environment, and what its run reads besides (`read`):
 * the secrets of its environment and service (in key order), the service's deployed custom domains
 * and its dependencies (in the order they were first made). One statement: the run reads nothing else
 * before it applies.
 */
export async function findDeploymentToRun(db: Db, id: string) {
  const row = await db
    .selectFrom('deployments as d')
    .innerJoin('services as s', 's.id', 'd.service_id')
    .innerJoin('environments as e', 'e.id', 'd.environment_id')
    .selectAll('s')
    .select([
      // generation is a bigint: read as text, like a plain select reads it.
      sql<AsJson<DeploymentRow>>`to_jsonb(d.*) || jsonb_build_object('generation', d.generation::text)`.as(
        '_deployment',
      ),
      sql<AsJson<EnvironmentRow>>`to_jsonb(e.*)`.as('_environment'),
      sql<Array<Omit<SecretRow, 'updated_at'> & { updated_at: string }>>`(
        SELECT coalesce(jsonb_agg(to_jsonb(x.*) ORDER BY x.key COLLATE "C"), '[]'::jsonb)
        FROM secrets x WHERE x.scope_id IN (d.environment_id, d.service_id))`.as('_secrets'),
      sql<string[]>`(
        SELECT coalesce(jsonb_agg(c.domain ORDER BY c.domain), '[]'::jsonb)
        FROM custom_domains c WHERE c.service_id = d.service_id AND c.state = 'deployed')`.as('_domains'),
      sql<
        Array<
          Omit<ServiceResourceRow, 'provisioned_at' | 'updated_at'> &
            Record<'provisioned_at' | 'updated_at', string | null>
        >
      >`(
        SELECT coalesce(jsonb_agg(to_jsonb(r.*)
          ORDER BY r.provisioned_at ASC NULLS LAST, r.kind, r.type, r.resource_id), '[]'::jsonb)
        FROM service_resources r WHERE r.service_id = d.service_id)`.as('_resources'),
    ])
    .where('d.id', '=', id)
    .executeTakeFirst();
  if (!row) return undefined;
  const { _deployment, _environment, _secrets, _domains, _resources, ...service } = row;
  return {
    deployment: withDates<DeploymentRow>(_deployment),
    service,
    environment: withDates<EnvironmentRow>(_environment),
    read: {
      secrets: _secrets.map((secret): SecretRow => ({ ...secret, updated_at: new Date(secret.updated_at) })),
      domains: _domains,
      resources: _resources.map(
        (r): ServiceResourceRow => ({
          ...r,
          provisioned_at: r.provisioned_at === null ? null : new Date(r.provisioned_at),
          updated_at: new Date(r.updated_at ?? 0),
        }),
      ),
    },
  };
}

/**
 * Starts a queued deployment and moves its service to `deploying` (when it is still the service's
 * latest and no delete reached it), in one statement; false when the deployment was not queued.
 */
export async function startDeployment(db: Db, id: string): Promise<boolean> {
  const now = new Date();
  return inTransaction(db, async (trx) => {
    const result = await trx
      .with('moved', (q) =>
        q
          .updateTable('deployments')
          .set({ state: 'in_progress', updated_at: now })
          .where('id', '=', id)
          .where('state', '=', 'queued')
          .returningAll(),
      )
      .with('followed', (q) =>
        q
          .updateTable('services')
          .from([
            'moved',
            trx
              .selectFrom('services')
              .select(['id as before_id', eventState('service', 'services').as('before_state')])
              .where('latest_deployment_id', '=', id)
              .where('state', 'not in', DELETE_STATES)
              .forNoKeyUpdate()
              .as('before'),
          ])
          .set({ state: 'deploying', updated_at: now })
          .whereRef('services.id', '=', 'moved.service_id')
          .whereRef('services.id', '=', 'before.before_id')
          .returningAll('services')
          .returning(changedSince('service', 'services').as('changed')),
      )
      .selectFrom('moved')
      .select((eb) => [
        sql<AsJson<DeploymentRow>>`to_jsonb(moved)`.as('deployment'),
        eb
          .selectFrom('followed')
          .select(sql<AsJson<ServiceRow> & { changed: boolean }>`to_jsonb(followed)`.as('service'))
          .as('service'),
      ])
      .executeTakeFirst();
    if (!result) return false;
    // Dates come as jsonb's strings: events keep them as such.
    await recordEvents(trx, 'deployment', 'updated', [result.deployment]);
    if (result.service?.changed) await recordEvents(trx, 'service', 'updated', [result.service]);
    return true;
  });
}

/** How a deployment in progress ends (endDeployment). */
export interface DeploymentEnd {
  to: 'success' | 'failed';
  set: { prov_deployment_id?: string; failure_reason: string } & DeployedSource;
  /**
   * The service's state, when it still follows this deployment and no delete reached it; for a
   * success also what was provisioned, written in any case.
   */
  serviceState: ServiceState;
  provisioned?: { namespace_name: string; kube_svc_alias: string };
  /** What runs now, observed at `observedAt` (kept unless a newer observation is recorded). */
  observed: Observation;
  observedAt: Date;
}

/**
 * Ends a deployment in progress under its job's claim, in one statement: removes the job `fence`
 * holds (nothing else is written when another worker holds it now), moves the deployment, its service
 * following it, and records what runs. `held`: the fence held (the job is gone with the commit);
 * `moved`: the deployment was in progress; `alerted`: the service has an open deploy_failed alert (a
 * success resolves it: the look rides in this statement).
 */
export async function endDeployment(
  trx: Db,
  deployment: Pick<DeploymentRow, 'id' | 'service_id'>,
  fence: Fence | undefined,
  end: DeploymentEnd,
): Promise<{ held: boolean; moved: boolean; alerted: boolean }> {
  const now = new Date();
  const assign = (values: Record<string, unknown>) =>
    sql.join(
      Object.entries(values)
        .filter(([, value]) => value !== undefined)
        .map(([column, value]) => sql`${sql.ref(column)} = ${value}`),
    );
  const done = fence
    ? sql`DELETE FROM jobs WHERE seq = ${fence.seq} AND locked_by = ${fence.workerId} AND attempts = ${fence.attempts} RETURNING seq`
    : sql`SELECT 0 AS seq`;
  const state = sql`CASE WHEN services.latest_deployment_id = ${deployment.id}
    AND services.state NOT IN (${sql.join(DELETE_STATES)}) THEN ${end.serviceState} ELSE services.state END`;
  // Without what was provisioned only the state changes: a service no longer on this deployment is left as it is.
  const following = end.provisioned
    ? sql``
    : sql`AND latest_deployment_id = ${deployment.id} AND state NOT IN (${sql.join(DELETE_STATES)})`;
  const { observed, observedAt } = end;
  const { rows } = await sql<{
    held: string;
    deployment: (AsJson<DeploymentRow> & { changed: boolean }) | null;
    service: (AsJson<ServiceRow> & { changed: boolean }) | null;
    alerted: boolean;
  }>`
    WITH done AS (${done}),
    moved AS (
      UPDATE deployments SET ${assign({ state: end.to, ...end.set, updated_at: now })}
      FROM (SELECT id AS before_id, ${eventState('deployment', 'deployments')} AS before_state FROM deployments
        WHERE id = ${deployment.id} AND state = 'in_progress' AND EXISTS (SELECT 1 FROM done)
        FOR NO KEY UPDATE) AS before
      WHERE deployments.id = before.before_id
      RETURNING deployments.*, ${changedSince('deployment', 'deployments')} AS changed),
    followed AS (
      UPDATE services SET ${assign({ ...end.provisioned, updated_at: now })}, state = ${state}
      FROM (SELECT id AS before_id, ${eventState('service', 'services')} AS before_state FROM services
        WHERE id = ${deployment.service_id} ${following} AND EXISTS (SELECT 1 FROM moved)
        FOR NO KEY UPDATE) AS before
      WHERE services.id = before.before_id
      RETURNING services.*, ${changedSince('service', 'services')} AS changed),
    observed AS (
      INSERT INTO service_observations (service_id, run_status, ready_count, observed_at)
      SELECT ${deployment.service_id}::uuid, ${observed.run_status}, ${observed.ready_count}::int, ${observedAt}::timestamptz
      FROM done
      ON CONFLICT (service_id) DO UPDATE SET run_status = excluded.run_status,
        ready_count = excluded.ready_count, observed_at = excluded.observed_at
      WHERE service_observations.observed_at <= excluded.observed_at
      RETURNING 1)
    SELECT (SELECT count(*) FROM done) AS held, (SELECT to_jsonb(moved) FROM moved) AS deployment,
      (SELECT to_jsonb(followed) FROM followed) AS service,
      EXISTS (SELECT 1 FROM alerts WHERE service_id = ${deployment.service_id}
        AND rule = 'deploy_failed' AND state = 'open') AS alerted`.execute(trx);
  const row = rows[0];
  if (!row || Number(row.held) === 0) return { held: false, moved: false, alerted: false };
  // Dates come as jsonb's strings: events keep them as such.
  if (row.deployment?.changed) await recordEvents(trx, 'deployment', 'updated', [row.deployment]);
  if (row.service?.changed) await recordEvents(trx, 'service', 'updated', [row.service]);
  return { held: true, moved: row.deployment !== null, alerted: row.alerted };
}

export async function findDeploymentsByIds(db: Db, ids: string[]): Promise<DeploymentRow[]> {
  if (ids.length === 0) return [];
  return db.selectFrom('deployments').selectAll().where('id', 'in', ids).execute();
}

/**
 * Moves a deployment from one of `from` to `to`; false when it was not in one of them. Every state
 * change goes through here, so a terminal state is entered once and never left.
 */
export async function transitionDeployment(
  db: Db,
  id: string,
  from: DeploymentRow['state'][],
  to: DeploymentRow['state'],
  extra: { prov_deployment_id?: string; failure_reason?: string } & DeployedSource = {},
): Promise<boolean> {
  const updated = await updateDeployments(db, (eb) => eb.and([eb('id', '=', id), eb('state', 'in', from)]), {
    state: to,
    ...extra,
    updated_at: new Date(),
  });
  return updated > 0;
}

/** Sets the failure_reason of a deployment that has not ended: what its latest attempt ran into. */
export async function noteUnfinishedDeployment(db: Db, id: string, reason: string): Promise<void> {
  await updateDeployments(
    db,
    (eb) => eb.and([eb('id', '=', id), eb('state', 'in', ['queued', 'in_progress'])]),
    {
      failure_reason: reason,
      updated_at: new Date(),
    },
  );
}

export async function unfinishedDeployments(db: Db, serviceId: string, states: DeploymentRow['state'][]) {
  return db
    .selectFrom('deployments')
    .selectAll()
    .where('service_id', '=', serviceId)
    .where('state', 'in', states)
    .execute();
}

export async function listDeployments(db: Db, serviceId: string, page: Page) {
  return pageAfter(
    db.selectFrom('deployments').selectAll().where('service_id', '=', serviceId),
    'deployments',
    page,
  );
}

/** The service's newest successful deployment: the one its runtime should be running. */
export async function newestSuccessfulDeployment(db: Db, serviceId: string) {
  return db
    .selectFrom('deployments')
    .selectAll()
    .where('service_id', '=', serviceId)
    .where('state', '=', 'success')
    .orderBy('generation', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/**
 * Records what a deployment runs with, once: a rerun (or a restore copying it) finds it there. A git
 * commit the deployment resolved its ops.json at is recorded with it, so the rerun builds that commit.
 */
export async function recordSnapshot(
  db: Db,
  id: string,
  snapshot: { ops_snapshot: string; variables_sealed: string; git_commit_ref?: string },
): Promise<void> {
  await updateDeployments(
    db,
    (eb) => eb.and([eb('id', '=', id), eb('variables_sealed', 'is', null)]),
    snapshot,
  );
}

/**
 * Asks the worker running a deployment to stop before traffic moves (it hears `cancels` when this
 * commits); false when it is not in progress.
 */
export async function requestCancel(db: Db, id: string): Promise<boolean> {
  const result = await db
    .updateTable('deployments')
    .set({ cancel_requested: true, updated_at: new Date() })
    .where('id', '=', id)
    .where('state', '=', 'in_progress')
    .executeTakeFirst();
  if (result.numUpdatedRows === 0n) return false;
  await notify(db, 'cancels', id);
  return true;
}

export async function cancelRequested(db: Db, id: string): Promise<boolean> {
  const row = await db
    .selectFrom('deployments')
    .select('cancel_requested')
    .where('id', '=', id)
    .executeTakeFirst();
  return row?.cancel_requested === true;
}

/** The service's successful deployments, newest generation first. */
export async function successfulDeployments(db: Db, serviceId: string, limit: number) {
  return db
    .selectFrom('deployments')
    .selectAll()
    .where('service_id', '=', serviceId)
    .where('state', '=', 'success')
    .orderBy('generation', 'desc')
    .limit(limit)
    .execute();
}

/** Who wrote a deployment's commit and why, as the git host's event told it. */
export async function recordCommitDetails(
  db: Db,
  id: string,
  details: { git_commit_author: string; git_commit_message: string },
): Promise<void> {
  await updateDeployments(db, (eb) => eb('id', '=', id), details);
}
