import assert from 'node:assert/strict';
import type { Db } from '../../src/store/database.ts';
import { openStore } from '../../src/store/database.ts';
import type { TestDatabase } from './database.ts';
import { pollUntil } from './poll.ts';
import { api, type BerthProcess, listening } from './process.ts';
import type { ServerFixture } from './server.ts';

/**
 * Issue 17's fault: a worker stopped (SIGSTOP) inside the provider call of deployment D1 loses its
 * lease; another worker finishes D1 and then D2; the first resumes (SIGCONT). The runtime must keep
 * serving D2. Run against a driver given what it needs: the settings, a service it can run, how to
 * tell that a deployment's provider call has started, and which deployment the runtime serves.
 */
export interface FencingDriver {
  env: Record<string, string>;
  service: Record<string, unknown>;
  /** True once the provider call of `deploymentId` made by the process `pid` has begun. */
  started(db: Db, deploymentId: string, pid: number): Promise<boolean>;
  /** The deployment whose version the runtime serves for the service. */
  serving(db: Db, serviceId: string): Promise<string | undefined>;
  /** True once the stale call of `pid` for `deploymentId` has ended (refused or stopped). */
  staleCallEnded?(db: Db, deploymentId: string, pid: number): Promise<boolean>;
}

/**
 * Issue 24's invariant, true at every moment: a deployment that is not final has its job (a job ends
 * only in the transaction that makes its deployment final), or nothing would ever finish it.
 */
export async function assertNoDeploymentWithoutJob(db: Db): Promise<void> {
  const orphans = await db
    .selectFrom('deployments')
    .select(['id', 'state'])
    .where('state', 'in', ['queued', 'in_progress'])
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('jobs')
            .select('seq')
            .where('jobs.kind', '=', 'deploy')
            .whereRef('jobs.subject_id', '=', 'deployments.id'),
        ),
      ),
    )
    .execute();
  assert.deepEqual(orphans, [], 'every deployment that is not final has a job to finish it');
}

/** The same between a kill and a restart, when no process holds the database (the embedded one allows one). */
export async function assertNoDeploymentWithoutJobIn(database: TestDatabase): Promise<void> {
  const store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
  try {
    await assertNoDeploymentWithoutJob(store.db);
  } finally {
    await store.close();
  }
}

export async function staleWorkerScenario(servers: ServerFixture, driver: FencingDriver): Promise<void> {
  const env = { BERTH_JOB_LEASE_MS: '1000', BERTH_PORT: '0', ...driver.env };
  const processes: BerthProcess[] = [];
  const { database } = servers;
  const store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
  try {
    const server = servers.run(['serve', '--no-workers'], env);
    processes.push(server);
    const { url } = await listening(server);
    const token = (await server.waitForOutput(/API token:\s+([0-9a-f-]{36})/))[1] as string;
    const envId = (await server.waitForOutput(/environment:\s+([0-9a-f-]{36})/))[1] as string;
    const startWorker = async () => {
      const worker = servers.run(['worker', '--concurrency', '1'], { ...env, BERTH_LOG_LEVEL: 'info' });
      processes.push(worker);
      await worker.waitForOutput(/worker started/);
      return worker;
    };
    const stale = await startWorker();
    await pollUntil('the environment to be available', async () => {
      const res = await api(`${url}/v1/environments/${envId}`, token);
      return res.body.data.environment.state === 'available' ? true : undefined;
    });
    const services = `${url}/v1/environments/${envId}/services`;
    const created = await api(services, token, 'POST', driver.service);
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const serviceId = created.body.data.service.id as string;
    const deploy = async () => {
      const res = await api(`${services}/${serviceId}/deploy`, token, 'POST', {});
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.data.deployment_id as string;
    };
    const ended = (id: string) =>
      pollUntil(
        `deployment ${id} to end`,
        async () => {
          const d = (await api(`${url}/v1/deployments/${id}`, token)).body.data.deployment;
          return d.state === 'success' || d.state === 'failed' ? d : undefined;
        },
        { timeoutMs: 180_000, intervalMs: 100 },
      );

    const d1 = await deploy();
    const stalePid = stale.child.pid as number;
    await pollUntil('the first worker to be inside the provider call of D1', async () =>
      (await driver.started(store.db, d1, stalePid)) ? true : undefined,
    );
    stale.child.kill('SIGSTOP');
    await assertNoDeploymentWithoutJob(store.db);

    // Its lease lapses; another worker finishes D1, then D2.
    await startWorker();
    assert.equal((await ended(d1)).state, 'success');
    const d2 = await deploy();
    assert.equal((await ended(d2)).state, 'success');
    // What serves settles once the older version has drained.
    const servesD2 = () =>
      pollUntil('D2 alone to serve', async () =>
        (await driver.serving(store.db, serviceId)) === d2 ? true : undefined,
      );
    await servesD2();

    stale.child.kill('SIGCONT');
    await assertNoDeploymentWithoutJob(store.db);
    if (driver.staleCallEnded) {
      const check = driver.staleCallEnded;
      await pollUntil(
        'the resumed worker to finish (or give up) its stale call',
        async () => ((await check(store.db, d1, stalePid)) ? true : undefined),
        { timeoutMs: 60_000 },
      );
    }
    // What it did after resuming was refused: the newer version keeps serving, and the API agrees.
    await pollUntil(
      'the stale worker to give the job up',
      async () =>
        /job failed|lease of this job|another worker holds/.test(stale.stdout()) ? true : undefined,
      { timeoutMs: 120_000 },
    );
    await servesD2();
    const service = (await api(`${services}/${serviceId}`, token)).body.data.service;
    assert.equal(service.latest_deployment.id, d2);
    assert.equal((await api(`${url}/v1/deployments/${d1}`, token)).body.data.deployment.state, 'success');
    await assertNoDeploymentWithoutJob(store.db);
  } finally {
    for (const p of processes) {
      p.child.kill('SIGCONT');
      await p.kill('SIGTERM');
    }
    await store.close();
  }
}
