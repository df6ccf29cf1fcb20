import { after, before, test } from 'node:test';
import { simTables } from '../../src/providers/sim/tables.ts';
import { createTestDatabase, TEST_DATABASE, type TestDatabase } from '../helpers/database.ts';
import { staleWorkerScenario } from '../helpers/fencing.ts';

/** Issue 17 item 1 on the sim driver: see test/helpers/fencing.ts. Two worker processes need Postgres. */
let db: TestDatabase;
before(async () => {
  db = await createTestDatabase();
});
after(() => db.drop());

const callBy = (pid: number) => `%:${pid}`;

test('a worker stopped mid-rollout and resumed after a newer deployment finished cannot bring the older version back (sim)', {
  skip: TEST_DATABASE !== 'postgres' && 'two worker processes share a database only on Postgres',
}, async () => {
  await staleWorkerScenario(db, {
    // Long enough steps that the stop lands inside the call; leases of one second lapse quickly.
    env: { BERTH_SIM_STEP_MS: '1500' },
    service: {
      name: 'Fenced',
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 128,
      docker_image: 'acme/fenced',
    },
    started: async (store, deploymentId, pid) =>
      (await simTables(store)
        .selectFrom('sim_calls')
        .select('id')
        .where('operation', '=', 'deploy')
        .where('subject_id', '=', deploymentId)
        .where('worker', 'like', callBy(pid))
        .executeTakeFirst()) !== undefined,
    serving: async (store, serviceId) =>
      (
        await simTables(store)
          .selectFrom('sim_workloads')
          .select('deployment_id')
          .where('service_id', '=', serviceId)
          .executeTakeFirst()
      )?.deployment_id,
    staleCallEnded: async (store, deploymentId, pid) =>
      (await simTables(store)
        .selectFrom('sim_calls')
        .select('outcome')
        .where('subject_id', '=', deploymentId)
        .where('worker', 'like', callBy(pid))
        .where('outcome', 'is not', null)
        .executeTakeFirst()) !== undefined,
  });
});
