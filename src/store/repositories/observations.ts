import type { Db } from '../database.ts';

/** What the provider last reported running for a service (written back by the jobs layer). */
export interface Observation {
  run_status: string;
  ready_count: number;
}

export const NEVER_OBSERVED: Observation = { run_status: 'not_deployed', ready_count: 0 };

export async function findObservation(db: Db, serviceId: string): Promise<Observation> {
  const row = await db
    .selectFrom('service_observations')
    .select(['run_status', 'ready_count'])
    .where('service_id', '=', serviceId)
    .executeTakeFirst();
  return row ?? NEVER_OBSERVED;
}

/** The observations of these services in one read, by service id; a service never observed is absent. */
export async function findObservations(db: Db, serviceIds: string[]): Promise<Map<string, Observation>> {
  if (serviceIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('service_observations')
    .select(['service_id', 'run_status', 'ready_count'])
    .where('service_id', 'in', serviceIds)
    .execute();
  return new Map(rows.map((r) => [r.service_id, { run_status: r.run_status, ready_count: r.ready_count }]));
}

/**
 * Writes what the provider reported, as of `observedAt` (when the observation began): an observation
 * never replaces one that began later, so a slow observer cannot undo what a deployment just wrote.
 */
export async function recordObservation(
  db: Db,
  serviceId: string,
  observed: Observation,
  observedAt: Date = new Date(),
): Promise<void> {
  const row = { run_status: observed.run_status, ready_count: observed.ready_count, observed_at: observedAt };
  await db
    .insertInto('service_observations')
    .values({ service_id: serviceId, ...row })
    .onConflict((oc) =>
      oc.column('service_id').doUpdateSet(row).where('service_observations.observed_at', '<=', observedAt),
    )
    .execute();
}

/**
 * Live services someone deployed whose last observation began before `observedBefore`: the ones an
 * observer looks at again.
 */
export async function observedServices(db: Db, observedBefore: Date) {
  return db
    .selectFrom('service_observations as o')
    .innerJoin('services as s', 's.id', 'o.service_id')
    .select(['s.id', 's.account_id', 's.environment_id', 's.type'])
    .where('s.is_deleted', '=', false)
    .where('o.observed_at', '<', observedBefore)
    .execute();
}
