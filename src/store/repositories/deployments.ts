import { type ExpressionBuilder, type Insertable, sql, type Updateable } from 'kysely';
import type { ServiceState } from '../../domain/service-states.ts';
import { DELETE_STATES } from '../../domain/service-states.ts';
import type { DeployedSource } from '../../providers/provider.ts';
import { compiled } from '../compiled.ts';
import type { Db } from '../database.ts';
import {
  changedSince,
  EVENT_SOURCES,
  eventState,
  inTransaction,
  recordEvents,
  setsEventColumns,
} from '../events.ts';
import { notify } from '../notifications.ts';
import type {
  Database,
  DeploymentRow,
  DeploymentsTable,
  EnvironmentRow,
  SecretRow,
  ServiceResourceRow,
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
    const inserted = await insertStatement.executeTakeFirst(trx, { row });
    if (!inserted) throw new Error('the deployment was not inserted');
    const { previous_state, ...deployment } = inserted;
    await recordEvents(trx, 'deployment', 'created', [deployment]);
    return { deployment, previousState: previous_state };
  });
}
const insertStatement = compiled((trx, { row }: { row: Insertable<DeploymentsTable> }) =>
  trx
    .insertInto('deployments')
    .values(row)
    .returningAll()
    .returning((eb) =>
      eb
        .selectFrom('deployments as p')
        .select('p.state')
        .whereRef('p.id', '=', 'deployments.prev_deployment_id')
        .as('previous_state'),
    ),
);

/** Which deployments an update changes: `id`, when in one of `states`, when not yet `unsealed` (its snapshot unrecorded). */
interface Which {
  id: string;
  states?: DeploymentRow['state'][];
  unsealed?: true;
}

/**
 * Updates the deployments `which` picks (locked first) with `set`, recording an `updated` event for
 * each whose event state changed; how many it updated.
 */
async function updateDeployments(db: Db, which: Which, set: Updateable<DeploymentsTable>): Promise<number> {
  if (!setsEventColumns('deployment', set)) {
    // No event can come of it: no transaction of its own, no lock but the update's.
    return (await updateStatement.execute(db, { which, set })).length;
  }
  return inTransaction(db, async (trx) => {
    const rows = await updateEventedStatement.execute(trx, { which, set });
    await recordEvents(
      trx,
      'deployment',
      'updated',
      rows.filter((r) => r.changed),
    );
    return rows.length;
  });
}
const picked =
  ({ id, states, unsealed }: Which) =>
  (eb: ExpressionBuilder<Database, 'deployments'>) =>
    eb.and([
      eb('deployments.id', '=', id),
      ...(states ? [eb('deployments.state', 'in', states)] : []),
      ...(unsealed ? [eb('deployments.variables_sealed', 'is', null)] : []),
    ]);
const updateStatement = compiled((db, v: { which: Which; set: Updateable<DeploymentsTable> }) =>
  db.updateTable('deployments').set(v.set).where(picked(v.which)).returning('id'),
);
/** The rows come back with the columns their events keep, not whole. */
const updateEventedStatement = compiled((trx, v: { which: Which; set: Updateable<DeploymentsTable> }) =>
  trx
    .updateTable('deployments')
    .from(
      trx
        .selectFrom('deployments')
        .where(picked(v.which))
        .select(['id as before_id', eventState('deployment', 'deployments').as('before_state')])
        .forNoKeyUpdate()
        .as('before'),
    )
    .set(v.set)
    .whereRef('deployments.id', '=', 'before.before_id')
    .returning(EVENT_SOURCES.deployment.columns.map((c) => `deployments.${c}` as const))
    .returning(changedSince('deployment', 'deployments').as('changed')),
);

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
  const row = await deploymentToRun.executeTakeFirst(db, { id });
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

const deploymentToRun = compiled((db, values: { id: string }) =>
  db
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
    .where('d.id', '=', values.id),
);

/**
 * Starts a queued deployment and moves its service to `deploying` (when it is still the service's
 * latest and no delete reached it), in one statement; false when the deployment was not queued.
 */
export async function startDeployment(db: Db, id: string): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const result = await startStatement.executeTakeFirst(trx, { id, now: new Date() });
    if (!result) return false;
    // Dates come as jsonb's strings: events keep them as such.
    await recordEvents(trx, 'deployment', 'updated', [result.deployment]);
    if (result.service?.changed) await recordEvents(trx, 'service', 'updated', [result.service]);
    return true;
  });
}
/** The rows come back with the columns their events keep, not whole (a services row has ~60). */
const startStatement = compiled((trx, { id, now }: { id: string; now: Date }) =>
  trx
    .with('moved', (q) =>
      q
        .updateTable('deployments')
        .set({ state: 'in_progress', updated_at: now })
        .where('id', '=', id)
        .where('state', '=', 'queued')
        .returning(EVENT_SOURCES.deployment.columns),
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
        .returning(EVENT_SOURCES.service.columns.map((c) => `services.${c}` as const))
        .returning(changedSince('service', 'services').as('changed')),
    )
    .selectFrom('moved')
    .select((eb) => [
      sql<Record<string, unknown>>`to_jsonb(moved)`.as('deployment'),
      eb
        .selectFrom('followed')
        .select(sql<Record<string, unknown> & { changed: boolean }>`to_jsonb(followed)`.as('service'))
        .as('service'),
    ]),
);

/** The columns an update's events keep, of its table: all it returns (a services row has ~60). */
const forEvents = {
  deployment: sql.raw(EVENT_SOURCES.deployment.columns.map((c) => `deployments.${c}`).join(', ')),
  service: sql.raw(EVENT_SOURCES.service.columns.map((c) => `services.${c}`).join(', ')),
};

/** How a deployment in progress ends (endDeployment). */
export interface DeploymentEnd {
  to: 'success' | 'failed';
  set: { prov_deployment_id?: string; failure_reason: string } & DeployedSource;
  /**
   * The service's state, when it still follows this deployment and no delete reached it; for a
   * success also what was provisioned, written in any case.
   */
  serviceState: ServiceState;
  /**
   * The deployment the service then follows, set with its state (a cancel hands the place back to the
   * newest one not cancelled); absent: this one stays its latest.
   */
  latestDeploymentId?: string | null;
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
  const row = await endStatement.executeTakeFirst(trx, {
    fence,
    id: deployment.id,
    serviceId: deployment.service_id,
    set: { state: end.to, ...end.set, updated_at: new Date() },
    provisioned: end.provisioned,
    serviceState: end.serviceState,
    latestDeploymentId: end.latestDeploymentId,
    observed: end.observed,
    observedAt: end.observedAt,
  });
  if (!row || Number(row.held) === 0) return { held: false, moved: false, alerted: false };
  // Dates come as jsonb's strings: events keep them as such.
  if (row.deployment?.changed) await recordEvents(trx, 'deployment', 'updated', [row.deployment]);
  if (row.service?.changed) await recordEvents(trx, 'service', 'updated', [row.service]);
  return { held: true, moved: row.deployment !== null, alerted: row.alerted };
}
const endStatement = compiled(
  (
    _trx,
    v: {
      fence: Fence | undefined;
      id: string;
      serviceId: string;
      set: Record<string, unknown>;
      provisioned: DeploymentEnd['provisioned'];
      serviceState: ServiceState;
      latestDeploymentId: string | null | undefined;
      observed: Observation;
      observedAt: Date;
    },
  ) => {
    const assign = (values: Record<string, unknown>) =>
      sql.join(Object.entries(values).map(([column, value]) => sql`${sql.ref(column)} = ${value}`));
    const done = v.fence
      ? sql`DELETE FROM jobs WHERE seq = ${v.fence.seq} AND locked_by = ${v.fence.workerId} AND attempts = ${v.fence.attempts} RETURNING seq`
      : sql`SELECT 0 AS seq`;
    const state = sql`CASE WHEN services.latest_deployment_id = ${v.id}
      AND services.state NOT IN (${sql.join(DELETE_STATES)}) THEN ${v.serviceState} ELSE services.state END`;
    // It moves with the state, on the same condition.
    const latest =
      v.latestDeploymentId === undefined
        ? sql``
        : sql`, latest_deployment_id = CASE WHEN services.latest_deployment_id = ${v.id}
      AND services.state NOT IN (${sql.join(DELETE_STATES)}) THEN ${v.latestDeploymentId}::uuid
      ELSE services.latest_deployment_id END`;
    // Without what was provisioned only the state changes: a service no longer on this deployment is left as it is.
    const following = v.provisioned
      ? sql``
      : sql`AND latest_deployment_id = ${v.id} AND state NOT IN (${sql.join(DELETE_STATES)})`;
    return sql<{
      held: string;
      deployment: (Record<string, unknown> & { changed: boolean }) | null;
      service: (Record<string, unknown> & { changed: boolean }) | null;
      alerted: boolean;
    }>`
    WITH done AS (${done}),
    moved AS (
      UPDATE deployments SET ${assign(v.set)}
      FROM (SELECT id AS before_id, ${eventState('deployment', 'deployments')} AS before_state FROM deployments
        WHERE id = ${v.id} AND state = 'in_progress' AND EXISTS (SELECT 1 FROM done)
        FOR NO KEY UPDATE) AS before
      WHERE deployments.id = before.before_id
      RETURNING ${forEvents.deployment}, ${changedSince('deployment', 'deployments')} AS changed),
    followed AS (
      UPDATE services SET ${assign({ ...v.provisioned, updated_at: v.set.updated_at })}, state = ${state}${latest}
      FROM (SELECT id AS before_id, ${eventState('service', 'services')} AS before_state FROM services
        WHERE id = ${v.serviceId} ${following} AND EXISTS (SELECT 1 FROM moved)
        FOR NO KEY UPDATE) AS before
      WHERE services.id = before.before_id
      RETURNING ${forEvents.service}, ${changedSince('service', 'services')} AS changed),
    observed AS (
      INSERT INTO service_observations (service_id, run_status, ready_count, observed_at)
      SELECT ${v.serviceId}::uuid, ${v.observed.run_status}, ${v.observed.ready_count}::int, ${v.observedAt}::timestamptz
      FROM done
      ON CONFLICT (service_id) DO UPDATE SET run_status = excluded.run_status,
        ready_count = excluded.ready_count, observed_at = excluded.observed_at
      WHERE service_observations.observed_at <= excluded.observed_at
      RETURNING 1)
    SELECT (SELECT count(*) FROM done) AS held, (SELECT to_jsonb(moved) FROM moved) AS deployment,
      (SELECT to_jsonb(followed) FROM followed) AS service,
      EXISTS (SELECT 1 FROM alerts WHERE service_id = ${v.serviceId}
        AND rule = 'deploy_failed' AND state = 'open') AS alerted`;
  },
);

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
  const updated = await updateDeployments(
    db,
    { id, states: from },
    {
      state: to,
      ...extra,
      updated_at: new Date(),
    },
  );
  return updated > 0;
}

/** Sets the failure_reason of a deployment that has not ended: what its latest attempt ran into. */
export async function noteUnfinishedDeployment(db: Db, id: string, reason: string): Promise<void> {
  await updateDeployments(
    db,
    { id, states: ['queued', 'in_progress'] },
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
  await updateDeployments(db, { id, unsealed: true }, snapshot);
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

/**
 * A service's newest deployment that was not cancelled (nor is `except`, one being cancelled): what the
 * service stands on once one is.
 */
export async function newestUncancelledDeployment(db: Db, serviceId: string, except?: string) {
  return db
    .selectFrom('deployments')
    .selectAll()
    .where('service_id', '=', serviceId)
    .where((eb) => eb.not(eb.and([eb('state', '=', 'failed'), eb('failure_reason', '=', 'cancelled')])))
    .$if(except !== undefined, (q) => q.where('id', '!=', except as string))
    .orderBy('generation', 'desc')
    .limit(1)
    .executeTakeFirst();
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
  await updateDeployments(db, { id }, details);
}
