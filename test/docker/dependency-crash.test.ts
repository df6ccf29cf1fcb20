import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { buildDependencyImages } from '../helpers/dependency-images.ts';
import { docker } from '../helpers/docker.ts';
import { assertNoDeploymentWithoutJobIn } from '../helpers/fencing.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, deploymentEnd } from '../helpers/process.ts';
import { KILLED_SERVER, serverFixture } from '../helpers/server.ts';

/**
 * Issue 11 on the docker provider: Berth SIGKILLed after the database's container was created and
 * before it was recorded as made. Started again, the deployment succeeds with one container and one
 * volume, and the password the service gets is the one that container was made with (it connects).
 */
const server = serverFixture('docker', KILLED_SERVER);
before(() => buildDependencyImages(), { timeout: 1_800_000 });

test('SIGKILL while a postgres dependency starts: after a restart the deployment succeeds with it made once', async () => {
  const first = await server.serve();
  const started = await server.firstStart(first);
  const { token, envId } = started;
  const envPath = `/v1/environments/${envId}`;
  const created = await api(`${first.url}${envPath}/services`, token, 'POST', {
    name: 'Crash Postgres',
    source: 'docker_image',
    docker_image: 'berth-deps/postgres',
    type: 'job',
    run_command: 'PGPASSWORD=$P psql "host=$H user=$U dbname=$D" -c "SELECT 1"',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 64,
    ops_json: JSON.stringify({
      dependencies: {
        rds: {
          instances: [
            {
              id: 'main-db',
              prefix: 'crashdata',
              exports: { H: '$address', U: '$username', P: '$password', D: '$dbName' },
            },
          ],
        },
      },
    }),
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const serviceId = created.body.data.service.id as string;
  const deployed = await api(`${first.url}${envPath}/services/${serviceId}/deploy`, token, 'POST', {});
  const deploymentId = deployed.body.data.deployment_id as string;

  // The container exists while its row still says provisioning (postgres initialises its volume first).
  const ofService = { filters: { label: [`berth.dependency-of=${serviceId}`] } };
  await pollUntil(
    'the database container to exist while it is provisioning',
    async () => {
      const res = await api(`${first.url}${envPath}/services/${serviceId}/dependencies`, token);
      const rds = res.body.data.dependencies.find((d: { kind: string }) => d.kind === 'rds');
      const containers = await docker.listContainers({ all: true, ...ofService });
      return rds?.state === 'provisioning' && containers.length > 0 ? true : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 50 },
  );
  assert.equal(await first.kill('SIGKILL'), 'SIGKILL');
  await assertNoDeploymentWithoutJobIn(server.database);

  const second = await server.serve();
  try {
    const deployment = await deploymentEnd(second.url, token, deploymentId, 300_000);
    assert.equal(deployment.state, 'success', deployment.failure_reason);
    assert.equal((await docker.listContainers({ all: true, ...ofService })).length, 1);
    assert.equal((await docker.listVolumes(ofService)).Volumes.length, 1);
  } finally {
    await second.kill('SIGTERM');
  }
});
