import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { simTables } from '../../src/providers/sim/tables.ts';
import { openStore } from '../../src/store/database.ts';
import { createTestDatabase, TEST_DATABASE, type TestDatabase } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, runBerth, startBerth } from '../helpers/process.ts';

/**
 * 200 deployments over 20 services. On Postgres one server and two `berth worker` processes share the
 * work; on the embedded database the server does it alone (and `berth worker` refuses). The record of
 * every provider call proves: each deployment ran once, never two of a service at the same time, and a
 * service's deployments finished in creation order.
 */
const SERVICES = 20;
const PER_SERVICE = 10;

let db: TestDatabase;
before(async () => {
  db = await createTestDatabase();
});
after(() => db.drop());

const env = () => ({
  BERTH_DATA_DIR: db.dataDir,
  BERTH_DATABASE_URL: db.databaseUrl ?? '',
  BERTH_SIM_STEP_MS: '10',
  BERTH_RATE_LIMIT_PER_MIN: '1000000',
});

test(`${SERVICES * PER_SERVICE} deployments shared by the workers: once each, one at a time per service, in order`, async () => {
  const server = await startBerth(env());
  const processes: BerthProcess[] = [server];
  try {
    const token = (await server.waitForOutput(/API token:\s+([0-9a-f-]{36})/))[1] as string;
    const envId = (await server.waitForOutput(/environment:\s+([0-9a-f-]{36})/))[1] as string;

    if (TEST_DATABASE === 'postgres') {
      for (let i = 0; i < 2; i++) {
        const worker = runBerth(['worker', '--concurrency', '4'], { ...env(), BERTH_LOG_LEVEL: 'info' });
        processes.push(worker);
        await worker.waitForOutput(/worker started/);
      }
    } else {
      const refused = runBerth(['worker'], env());
      assert.equal(await refused.exited, 2);
      assert.match(refused.stderr(), /berth worker needs BERTH_DATABASE_URL/);
    }

    await pollUntil('the environment to be available', async () => {
      const res = await api(`${server.url}/v1/environments/${envId}`, token);
      return res.body.data.environment.state === 'available' ? true : undefined;
    });

    const expected = new Map<string, string[]>();
    await Promise.all(
      Array.from({ length: SERVICES }, async (_, s) => {
        const created = await api(`${server.url}/v1/environments/${envId}/services`, token, 'POST', {
          name: `Load ${String.fromCharCode(97 + s)}`,
          source: 'docker_image',
          type: 'worker',
          replica_count: 1,
          cpu_count_min: 0.5,
          memory_mb_min: 128,
          docker_image: 'acme/load',
        });
        const serviceId = created.body.data.service.id as string;
        const ids: string[] = [];
        for (let d = 0; d < PER_SERVICE; d++) {
          const res = await api(
            `${server.url}/v1/environments/${envId}/services/${serviceId}/deploy`,
            token,
            'POST',
            {
              docker_image_tag: `v${d}`,
            },
          );
          assert.equal(res.status, 200);
          ids.push(res.body.data.deployment_id);
        }
        expected.set(serviceId, ids);
      }),
    );

    await pollUntil(
      'every deployment to succeed',
      async () => {
        for (const serviceId of expected.keys()) {
          const res = await api(
            `${server.url}/v1/environments/${envId}/services/${serviceId}/deployments?limit=100`,
            token,
          );
          if (!res.body.data.deployments.every((d: { state: string }) => d.state === 'success'))
            return undefined;
        }
        return true;
      },
      { timeoutMs: 120_000, intervalMs: 200 },
    );
  } finally {
    for (const p of processes) await p.kill('SIGTERM');
  }

  const store = await openStore({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
  try {
    const calls = await simTables(store.db)
      .selectFrom('sim_calls')
      .innerJoin('deployments', 'deployments.id', 'sim_calls.subject_id')
      .select([
        'sim_calls.subject_id',
        'sim_calls.service_id',
        'sim_calls.worker',
        'sim_calls.started_at',
        'sim_calls.finished_at',
        'deployments.created_at',
      ])
      .where('sim_calls.operation', '=', 'deploy')
      .orderBy('sim_calls.started_at')
      .execute();
    assert.equal(calls.length, SERVICES * PER_SERVICE, 'one provider call per deployment, none repeated');
    assert.equal(new Set(calls.map((c) => c.subject_id)).size, SERVICES * PER_SERVICE);

    const byService = Map.groupBy(calls, (c) => c.service_id as string);
    for (const [serviceId, serviceCalls] of byService) {
      for (let i = 1; i < serviceCalls.length; i++) {
        const previous = serviceCalls[i - 1] as (typeof serviceCalls)[number];
        const current = serviceCalls[i] as (typeof serviceCalls)[number];
        assert.ok(
          (previous.finished_at as Date).getTime() <= current.started_at.getTime(),
          `two deployments of service ${serviceId} overlapped`,
        );
        assert.ok(
          previous.created_at <= current.created_at,
          `service ${serviceId} ran a later deployment first`,
        );
      }
    }
    const workers = new Set(calls.map((c) => c.worker));
    if (TEST_DATABASE === 'postgres')
      assert.ok(workers.size >= 2, `the work was shared (by ${[...workers].join(', ')})`);
  } finally {
    await store.close();
  }
});
