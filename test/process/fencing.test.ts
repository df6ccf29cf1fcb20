import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { simTables } from '../../src/providers/sim/tables.ts';
import { openStore } from '../../src/store/database.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { assertNoDeploymentWithoutJob, staleWorkerScenario } from '../helpers/fencing.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, firstStartOf, listening } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/** Issue 17 item 1 on the sim driver: see test/helpers/fencing.ts. Two worker processes need Postgres. */
const servers = serverFixture('sim');

const callBy = (pid: number) => `%:${pid}`;

test('a worker stopped mid-rollout and resumed after a newer deployment finished cannot bring the older version back (sim)', {
  skip: TEST_DATABASE !== 'postgres' && 'two worker processes share a database only on Postgres',
}, async () => {
  await staleWorkerScenario(servers, {
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

/**
 * Issue 24 item 2: worker 1 stopped (SIGSTOP) inside the transaction that starts a deployment, after its
 * start statement and before its commit; its lease lapses and worker 2 takes the job over, and waits on
 * the deployment's row. Worker 1 resumes: its start must not commit (the job is no longer its), or
 * worker 2 finds the deployment started, takes that as done and ends the job, leaving it in_progress
 * forever with nothing to finish it.
 */
test('a worker stopped between its start statement and its commit cannot leave a deployment without a job', {
  skip: TEST_DATABASE !== 'postgres' && 'two worker processes share a database only on Postgres',
}, async () => {
  const race = await servers.another();
  const env = { BERTH_JOB_LEASE_MS: '1000', BERTH_SIM_STEP_MS: '50', BERTH_PORT: '0' };
  const processes: BerthProcess[] = [];
  const { databaseUrl, dataDir } = race.database;
  const store = await openStore({ databaseUrl, dataDir });
  const holder = new pg.Client({ connectionString: databaseUrl });
  await holder.connect();
  try {
    const server = await listening(race.run(['serve', '--no-workers'], env));
    processes.push(server);
    const startWorker = async () => {
      const worker = race.run(['worker', '--concurrency', '1'], { ...env, BERTH_LOG_LEVEL: 'info' });
      processes.push(worker);
      await worker.waitForOutput(/worker started/);
      return worker;
    };
    const first = await startWorker();
    const { token, envUrl } = await firstStartOf(server);
    const created = await api(`${envUrl}/services`, token, 'POST', {
      name: 'Started Once',
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 128,
      docker_image: 'acme/started',
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));

    // The deployment is accepted while worker 1 cannot claim it, then its row is locked: worker 1's start
    // statement waits on it, and once it is free runs to its end while worker 1 is paused, before the
    // job's fence and the commit.
    first.child.kill('SIGSTOP');
    const res = await api(`${envUrl}/services/${created.body.data.service.id}/deploy`, token, 'POST', {});
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const deploymentId = res.body.data.deployment_id as string;
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM deployments WHERE id = $1 FOR UPDATE', [deploymentId]);
    first.child.kill('SIGCONT');
    const waiting = (what: string, query: string) =>
      pollUntil(`${what} to wait on a lock`, async () => {
        // Not on the holder's connection: inside a transaction, pg_stat_activity is read once.
        const { rows } = await sql`SELECT 1 FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND query ILIKE ${query}`.execute(store.db);
        return rows.length > 0 ? true : undefined;
      });
    await waiting('worker 1 (starting its deployment)', '%update "deployments"%');
    assert.equal(
      (
        await store.db
          .selectFrom('deployments')
          .select('state')
          .where('id', '=', deploymentId)
          .executeTakeFirst()
      )?.state,
      'queued',
      'the start is not committed yet',
    );
    // Paused there: its transaction stays open, holding the deployment's row, once the holder's lock is free.
    first.child.kill('SIGSTOP');
    await holder.query('COMMIT');

    const second = await startWorker();
    const secondPid = second.child.pid as number;
    await pollUntil('worker 2 to take the job over', async () => {
      const job = await store.db
        .selectFrom('jobs')
        .select('locked_by')
        .where('subject_id', '=', deploymentId)
        .executeTakeFirst();
      return job?.locked_by?.includes(`:${secondPid}:`) ? true : undefined;
    });
    await waiting('worker 2 (starting the same deployment)', '%update "deployments"%');

    first.child.kill('SIGCONT');
    const end = await pollUntil(
      'the deployment to end, or to be left without a job',
      async () => {
        // One statement, one snapshot: read apart, an outcome committed between the two reads (the
        // job's removal with the deployment's end) looked like a deployment left without its job.
        const deployment = await store.db
          .selectFrom('deployments')
          .select((eb) => [
            'state',
            eb
              .exists(eb.selectFrom('jobs').select('seq').where('subject_id', '=', deploymentId))
              .as('has_job'),
          ])
          .where('id', '=', deploymentId)
          .executeTakeFirstOrThrow();
        if (deployment.state === 'success' || deployment.state === 'failed') return deployment.state;
        return deployment.has_job ? undefined : `${deployment.state} without a job`;
      },
      { timeoutMs: 60_000, intervalMs: 50 },
    );
    assert.equal(end, 'success');
    await assertNoDeploymentWithoutJob(store.db);
  } finally {
    await holder.end();
    for (const p of processes) {
      p.child.kill('SIGCONT');
      await p.kill('SIGTERM');
    }
    await store.close();
  }
});
