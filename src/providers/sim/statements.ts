import { type Insertable, sql } from 'kysely';
import { compiled } from '../../store/compiled.ts';
import { type SimCallsTable, type SimWorkloadsTable, simTables } from './tables.ts';

/**
 * The simulated cloud's statements on a deployment's path, built once (store/compiled.ts) as Berth's
 * own are: in the deploy bench the simulated cloud stands in for a real one's API, and building these
 * anew for every call was as much of Node's work as all of Berth's compiled statements.
 * @module
 */

/** A call begins: its row, whose id the call's outcome is recorded against. */
export const beginCall = compiled((berth, { row }: { row: Insertable<SimCallsTable> }) =>
  simTables(berth).insertInto('sim_calls').values(row).returning('id'),
);

export const endCall = compiled((berth, { id, outcome }: { id: string; outcome: string }) =>
  simTables(berth)
    .updateTable('sim_calls')
    .set({ outcome, finished_at: sql`clock_timestamp()` })
    .where('id', '=', id),
);

/** A deployment's finished outcome (an aborted call decides nothing), and the service's generation in place. */
export const applyState = compiled((berth, v: { deploymentId: string; serviceId: string }) =>
  simTables(berth).selectNoFrom((eb) => [
    eb
      .selectFrom('sim_calls')
      .select('outcome')
      .where('subject_id', '=', v.deploymentId)
      .where('operation', '=', 'deploy')
      .where('outcome', 'is not', null)
      .where('outcome', 'not like', 'aborted: %')
      .limit(1)
      .as('done'),
    eb.selectFrom('sim_workloads').select('generation').where('service_id', '=', v.serviceId).as('in_place'),
  ]),
);

/**
 * The workload moves to this generation unless a newer one is in place, and the call's outcome is
 * recorded in the same statement: `outcome` when the row moved, superseded when it did not.
 */
export const moveWorkload = compiled(
  (berth, v: { row: Insertable<SimWorkloadsTable>; callId: string; outcome: string }) =>
    simTables(berth)
      .with('moved', (db) =>
        db
          .insertInto('sim_workloads')
          .values(v.row)
          .onConflict((oc) =>
            oc
              .column('service_id')
              .doUpdateSet((eb) => ({
                deployment_id: eb.ref('excluded.deployment_id'),
                target: eb.ref('excluded.target'),
                replicas: eb.ref('excluded.replicas'),
                run_status: eb.ref('excluded.run_status'),
                generation: eb.ref('excluded.generation'),
                cron_jobs: eb.ref('excluded.cron_jobs'),
                variables: eb.ref('excluded.variables'),
                updated_at: sql`clock_timestamp()`,
              }))
              .whereRef('sim_workloads.generation', '<=', 'excluded.generation'),
          )
          .returning('service_id'),
      )
      .with('call', (db) =>
        db
          .updateTable('sim_calls')
          .set({
            outcome: sql<string>`CASE WHEN EXISTS (SELECT 1 FROM moved) THEN ${v.outcome} ELSE 'superseded' END`,
            finished_at: sql`clock_timestamp()`,
          })
          .where('id', '=', v.callId),
      )
      .selectFrom('moved')
      .select('service_id'),
);

export const workloadOf = compiled((berth, { serviceId }: { serviceId: string }) =>
  simTables(berth)
    .selectFrom('sim_workloads')
    .select(['run_status', 'replicas', 'generation'])
    .where('service_id', '=', serviceId),
);
