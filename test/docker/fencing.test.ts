import { test } from 'node:test';
import { dockerTables } from '../../src/providers/engine/tables.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { BASE_IMAGE, docker } from '../helpers/docker.ts';
import { staleWorkerScenario } from '../helpers/fencing.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Issue 17 item 1 on the docker driver: see test/helpers/fencing.ts. Two worker processes need Postgres:
 * package.json's test:docker runs this file once more with BERTH_TEST_DATABASE=postgres.
 */
const server = serverFixture('docker');

const containersOf = (labels: string[], all: boolean) =>
  docker.listContainers({ all, filters: { label: ['berth.managed=true', ...labels] } });

test('a worker stopped mid-rollout and resumed after a newer deployment finished cannot bring the older version back (docker)', {
  skip: TEST_DATABASE !== 'postgres' && 'two worker processes share a database only on Postgres',
}, async () => {
  await staleWorkerScenario(server, {
    env: {},
    service: {
      name: 'Fenced Worker',
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.25,
      memory_mb_min: 32,
      docker_image: BASE_IMAGE.replace(/:latest$/, ''),
      run_command: 'sleep 3600',
      // A stale rollout gives up within a minute of its start.
      ops_json: JSON.stringify({ deploy_timeout: 1 }),
    },
    started: async (_db, deploymentId) =>
      (await containersOf([`berth.deployment=${deploymentId}`], true)).length > 0,
    serving: async (store, serviceId) => {
      const route = await dockerTables(store)
        .selectFrom('docker_routes')
        .select('deployment_id')
        .where('service_id', '=', serviceId)
        .executeTakeFirst();
      const running = await containersOf([`berth.service=${serviceId}`], false);
      for (const c of running) server.own(c.Labels['berth.environment'] ?? '');
      // Spare network sandboxes (on by default) belong to no deployment.
      const replicas = running.filter((c) => c.Labels['berth.role'] !== 'sandbox');
      const versions = new Set(replicas.map((c) => c.Labels['berth.deployment']));
      // What serves is one deployment: the routed one, and only its replicas run.
      return versions.size === 1 && versions.has(route?.deployment_id) ? route?.deployment_id : undefined;
    },
  });
});
