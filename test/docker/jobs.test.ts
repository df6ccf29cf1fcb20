import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { BASE_IMAGE, containersOfService, docker } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, deploymentEnd } from '../helpers/process.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/** Jobs (one run per deployment, success is exit 0), cron services on their schedule, workers, charts. */
let server: TestServer;
let token: string;
let envUrl: string;
let envId: string;

before(async () => {
  server = await startTestServer('docker');
  ({ token, envId, envUrl } = server);
});
after(() => server?.close());

// The base image is local: with no docker_registry the provider runs a local image without pulling.
const BUSYBOX = {
  source: 'docker_image',
  docker_image: 'berth-test/busybox',
  replica_count: 1,
  cpu_count_min: 0.25,
  memory_mb_min: 32,
};

async function create(body: Record<string, unknown>) {
  const res = await api(`${envUrl}/services`, token, 'POST', { ...BUSYBOX, ...body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.service as { id: string };
}

async function deployAndWait(serviceId: string, body: Record<string, unknown> = {}) {
  const res = await api(`${envUrl}/services/${serviceId}/deploy`, token, 'POST', body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return deploymentEnd(server.berth.url, token, res.body.data.deployment_id, 90_000);
}

test('a job deployment succeeds on exit 0 and fails on exit 1, with its output in the reason', async () => {
  const job = await create({ name: 'Nightly Report', type: 'job', run_command: 'echo report done' });
  const ok = await deployAndWait(job.id);
  assert.equal(ok.state, 'success', ok.failure_reason);
  assert.equal((await api(`${envUrl}/services/${job.id}`, token)).body.data.run_status, 'completed');

  const patched = await api(`${envUrl}/services/${job.id}`, token, 'PATCH', {
    run_command: 'echo disk full >&2; exit 1',
  });
  assert.equal(patched.status, 200);
  const failed = await deployAndWait(job.id);
  assert.equal(failed.state, 'failed');
  assert.match(failed.failure_reason, /the job exited with code 1\. Last output: disk full/);
  assert.equal((await api(`${envUrl}/services/${job.id}`, token)).body.data.run_status, 'failed');
});

test('a worker runs its replicas; a helm chart fails with a note that docker cannot run charts', async () => {
  const worker = await create({
    name: 'Queue Worker',
    type: 'worker',
    replica_count: 2,
    run_command: 'sleep 3600',
  });
  const deployed = await deployAndWait(worker.id);
  assert.equal(deployed.state, 'success', deployed.failure_reason);
  const live = (await api(`${envUrl}/services/${worker.id}`, token)).body.data;
  assert.equal(live.ready_count, 2);
  assert.equal(live.run_status, 'running');

  const chart = await create({
    name: 'Chart',
    source: 'helm_chart',
    helm_chart_repo: 'https://charts.example.com',
    helm_chart_name: 'app',
    replica_count: undefined,
    cpu_count_min: undefined,
    memory_mb_min: undefined,
    docker_image: undefined,
  });
  const refused = await deployAndWait(chart.id);
  assert.equal(refused.state, 'failed');
  assert.match(refused.failure_reason, /docker provider cannot run Helm charts/);
});

test('a cron service with a one-minute schedule runs within two minutes; a stranger template is left alone', async () => {
  // A cron template of a service this Berth does not know (another Berth on the same engine), ticking
  // every second: it must never run here.
  const stranger = randomUUID();
  await docker.createContainer({
    Image: BASE_IMAGE,
    Cmd: ['/bin/sh', '-c', 'echo stranger'],
    Labels: {
      'berth.managed': 'true',
      'berth.role': 'cron-template',
      'berth.cron-schedule': '* * * * * *',
      'berth.service': stranger,
      'berth.environment': envId,
    },
  });
  const cron = await create({
    name: 'Every Minute',
    type: 'cron',
    cron_schedule: '* * * * *',
    run_command: 'echo tick',
  });
  const deployed = await deployAndWait(cron.id);
  assert.equal(deployed.state, 'success', deployed.failure_reason);
  assert.equal((await api(`${envUrl}/services/${cron.id}`, token)).body.data.run_status, 'scheduled');
  const run = await pollUntil(
    'a cron run to finish',
    async () => {
      const runs = await containersOfService(cron.id);
      return runs.find((c) => c.Labels['berth.role'] === 'cron-run' && c.State === 'exited');
    },
    { timeoutMs: 130_000, intervalMs: 1000 },
  );
  const inspected = await docker.getContainer(run.Id).inspect();
  assert.equal(inspected.State.ExitCode, 0);
  assert.deepEqual(inspected.Config.Cmd, ['/bin/sh', '-c', 'echo tick']);
  const strangerRuns = (await containersOfService(stranger)).filter(
    (c) => c.Labels['berth.role'] === 'cron-run',
  );
  assert.deepEqual(strangerRuns, []);
});
