import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { BASE_IMAGE, buildImage, containersOfService, docker } from '../helpers/docker.ts';
import { createRepo } from '../helpers/git.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';
import { openSse } from '../helpers/sse.ts';

/** What a user sees of real containers: their output (service logs) and each deployment's log. */
const server = serverFixture('docker');
let gitRoot: string;
let commits: string[] = [];
let berth: BerthProcess & { url: string };
let token: string;
let envUrl: string;

before(async () => {
  for (const tag of ['v1', 'v2'])
    await buildImage(
      `berth-test/echo:${tag}`,
      `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "while true; do echo running ${tag}; sleep 1; done"]\n`,
    );
  gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-'));
  commits = await createRepo(gitRoot, 'acme/logbook', [
    {
      message: 'a worker that builds loudly',
      files: {
        Dockerfile: `FROM ${BASE_IMAGE}\nRUN echo "compiling the logbook, run ${RUN}"\nCMD ["/bin/sh", "-c", "while true; do sleep 1; done"]\n`,
        'ops.json': JSON.stringify({}),
      },
    },
    {
      message: 'a health check that fails and says why',
      files: {
        'ops.json': JSON.stringify({
          health_check: {
            type: 'shell',
            command: 'echo "database unreachable, key=$API_KEY"; exit 1',
            timeout: 2,
          },
          deploy_timeout: 1,
        }),
      },
    },
  ]);
  ({ berth, token, envUrl } = await server.start({ BERTH_GIT_BASE_URL: `file://${gitRoot}/` }));
});
after(() => {
  if (gitRoot) fs.rmSync(gitRoot, { recursive: true, force: true });
});

const BUSYBOX = {
  source: 'docker_image',
  docker_image: 'berth-test/busybox',
  replica_count: 1,
  cpu_count_min: 0.25,
  memory_mb_min: 32,
};

const SECRET = 'tr0ub4dor-and-3';
// A build step of its own each run, so the build cache cannot answer it without running it.
const RUN = randomUUID();

async function create(body: Record<string, unknown>) {
  const res = await api(`${envUrl}/services`, token, 'POST', { ...BUSYBOX, ...body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.service as { id: string };
}

async function deployAndWait(serviceId: string, body: Record<string, unknown> = {}) {
  const res = await api(`${envUrl}/services/${serviceId}/deploy`, token, 'POST', body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return deploymentEnd(berth.url, token, res.body.data.deployment_id, 120_000);
}

test('service logs: what the container printed, secrets masked, and with follow a line printed after the call', async () => {
  const worker = await create({
    name: 'Chatty Worker',
    type: 'worker',
    secrets: [{ key: 'API_KEY', value: SECRET }],
    run_command:
      'i=0; while true; do i=$((i+1)); echo "tick $i key=$API_KEY"; echo "warn $i" >&2; sleep 1; done',
  });
  const ok = await deployAndWait(worker.id);
  assert.equal(ok.state, 'success', ok.failure_reason);
  const logsUrl = `${envUrl}/services/${worker.id}/logs`;

  const lines = await pollUntil('two ticks', async () => {
    const res = await api(`${logsUrl}?tail=50`, token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const ticks = res.body.data.lines.filter((l: { line: string }) => l.line.startsWith('tick'));
    return ticks.length >= 2 ? res.body.data.lines : undefined;
  });
  const tick = lines.find((l: { line: string }) => l.line.startsWith('tick 1 '));
  assert.equal(tick.line, 'tick 1 key=[redacted]');
  assert.equal(tick.stream, 'stdout');
  assert.match(tick.replica, /^berth-[a-z0-9-]+-0$/, 'the container that printed it');
  assert.ok(
    lines.some((l: { stream: string; line: string }) => l.stream === 'stderr' && /^warn \d+$/.test(l.line)),
  );
  assert.equal(JSON.stringify(lines).includes(SECRET), false, 'no secret value in a log line');
  const times = lines.map((l: { time: string }) => l.time);
  assert.deepEqual([...times].sort(), times);

  const tail = await api(`${logsUrl}?tail=1`, token);
  assert.equal(tail.body.data.lines.length, 1);

  const called = new Date().toISOString();
  const stream = await openSse(`${logsUrl}?follow=true&tail=1`, token);
  try {
    const events = await stream.until('a tick printed after the call', (events) =>
      events.some((e) => e.event === 'line' && e.data.line.startsWith('tick') && e.data.time > called),
    );
    assert.equal(JSON.stringify(events).includes(SECRET), false);
    const seen = events.map((e) => `${e.data.time} ${e.data.stream} ${e.data.line}`);
    assert.equal(new Set(seen).size, seen.length, 'no line twice');
  } finally {
    stream.close();
  }
});

test('deployment log: a git build streams its output to the end; a failed health check shows its output, secrets masked', async () => {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Logbook',
    source: 'github',
    type: 'worker',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 32,
    git_repo_full_name: 'acme/logbook',
    git_repo_branch: 'main',
    ops_json_path: 'ops.json',
    secrets: [{ key: 'API_KEY', value: SECRET }],
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const serviceUrl = `${envUrl}/services/${created.body.data.service.id}`;

  // Release one: follow its log from the start as a stream, to its end.
  const first = await api(`${serviceUrl}/deploy`, token, 'POST', { commit_id: commits[0] });
  assert.equal(first.status, 200, JSON.stringify(first.body));
  const firstId = first.body.data.deployment_id;
  const stream = await openSse(`${berth.url}/v1/deployments/${firstId}/logs?follow=true`, token);
  await stream.ended;
  const end = stream.events.at(-1);
  assert.equal(end?.event, 'end');
  assert.equal(end?.data.deployment.state, 'success', end?.data.deployment.failure_reason);
  const lines = stream.events.filter((e) => e.event === 'line').map((e) => e.data);
  const build = lines.filter((l) => l.step === 'build').map((l) => l.line);
  assert.ok(
    build.some((l) => l === `compiling the logbook, run ${RUN}`),
    `the build's own output is in the log: ${JSON.stringify(build)}`,
  );
  assert.ok(
    lines.some((l) => l.step === 'source' && /^Commit [0-9a-f]{40} by Berth Test/.test(l.line)),
    'the commit the source resolved to',
  );
  assert.ok(lines.some((l) => l.step === 'rollout' && /replicas healthy$/.test(l.line)));
  assert.equal(lines.at(-1)?.line, 'Deployment succeeded');

  // Release two: its shell health check fails, printing a secret; the log shows the output, masked.
  const second = await deployAndWait(created.body.data.service.id, {});
  assert.equal(second.state, 'failed');
  const log = await api(`${berth.url}/v1/deployments/${second.id}/logs`, token);
  const text = log.body.data.lines.map((l: { line: string }) => l.line).join('\n');
  assert.match(
    text,
    /the shell health check did not pass; it printed: database unreachable, key=\[redacted\]/,
  );
  assert.match(text, /Deployment failed: the new version did not become healthy/);
  assert.equal(text.includes(SECRET), false, 'no secret value in the deployment log');
  assert.equal(second.failure_reason.includes(SECRET), false, 'nor in the failure reason');
  const ops = await api(`${berth.url}/v1/deployments/${second.id}/operations`, token);
  const rollout = ops.body.data.operations.find((o: { step: string }) => o.step === 'rollout');
  assert.equal(rollout.state, 'failed');
});

/** The running replicas of one deployment: image and variables, as the Engine reports them. */
async function replicasOf(serviceId: string, deploymentId: string) {
  const running = await containersOfService(serviceId, false);
  const mine = running.filter((c) => c.Labels['berth.deployment'] === deploymentId);
  return Promise.all(
    mine.map(async (c) => {
      const info = await docker.getContainer(c.Id).inspect();
      return { id: c.Id, image: info.Config.Image, env: info.Config.Env };
    }),
  );
}

test('cancel on docker: a queued deployment never runs; one waiting for health stops, its containers removed', async () => {
  const stuck = await create({
    name: 'Stuck Worker',
    type: 'worker',
    docker_image: 'berth-test/echo',
    ops_json: JSON.stringify({
      health_check: { type: 'shell', command: 'exit 1', timeout: 1 },
      deploy_timeout: 5,
    }),
  });
  const serviceUrl = `${envUrl}/services/${stuck.id}`;
  const running = (await api(`${serviceUrl}/deploy`, token, 'POST', { docker_image_tag: 'v1' })).body.data
    .deployment_id;
  const queued = (await api(`${serviceUrl}/deploy`, token, 'POST', { docker_image_tag: 'v2' })).body.data
    .deployment_id;
  const cancelQueued = await api(`${berth.url}/v1/deployments/${queued}/cancel`, token, 'POST', {});
  assert.equal(cancelQueued.status, 200, JSON.stringify(cancelQueued.body));
  assert.equal(cancelQueued.body.data.deployment.failure_reason, 'cancelled');

  await pollUntil('the first deployment to have a replica', async () =>
    (await replicasOf(stuck.id, running)).length > 0 ? true : undefined,
  );
  const cancelled = await api(`${berth.url}/v1/deployments/${running}/cancel`, token, 'POST', {});
  assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
  const end = await deploymentEnd(berth.url, token, running, 60_000);
  assert.equal(end.state, 'failed');
  assert.equal(end.failure_reason, 'cancelled');
  const left = await containersOfService(stuck.id);
  assert.deepEqual(
    left.filter((c) => [running, queued].includes(c.Labels['berth.deployment'] ?? '')),
    [],
    'nothing of either deployment is left',
  );
  const ops = await api(`${berth.url}/v1/deployments/${running}/operations`, token);
  assert.equal(
    ops.body.data.operations.some((o: { step: string }) => o.step === 'traffic'),
    false,
  );
  const again = await api(`${berth.url}/v1/deployments/${running}/cancel`, token, 'POST', {});
  assert.equal(again.status, 409);
});

test('rollback on docker brings back the old image and the old secret value; restart replaces the replicas', async () => {
  const svc = await create({
    name: 'Versioned Worker',
    type: 'worker',
    docker_image: 'berth-test/echo',
    secrets: [{ key: 'API_KEY', value: 'docker-secret-one' }],
  });
  const serviceUrl = `${envUrl}/services/${svc.id}`;
  const v1 = await deployAndWait(svc.id, { docker_image_tag: 'v1' });
  assert.equal(v1.state, 'success', v1.failure_reason);
  const put = await api(`${serviceUrl}/secrets`, token, 'PUT', {
    secrets: [{ key: 'API_KEY', value: 'docker-secret-two' }],
  });
  assert.equal(put.status, 200);
  const v2 = await deployAndWait(svc.id, { docker_image_tag: 'v2' });
  assert.equal(v2.state, 'success', v2.failure_reason);
  const [now] = await replicasOf(svc.id, v2.id);
  assert.equal(now?.image, 'berth-test/echo:v2');
  assert.ok(now?.env.includes('API_KEY=docker-secret-two'));

  const rolled = await api(`${serviceUrl}/rollback`, token, 'POST', {});
  assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
  const restore = await deploymentEnd(berth.url, token, rolled.body.data.deployment_id, 120_000);
  assert.equal(restore.state, 'success', restore.failure_reason);
  assert.equal(restore.type, 'restore');
  const [back] = await replicasOf(svc.id, restore.id);
  assert.equal(back?.image, 'berth-test/echo:v1', 'the old image');
  assert.ok(back?.env.includes('API_KEY=docker-secret-one'), 'the old secret value');

  const restarted = await api(`${serviceUrl}/restart`, token, 'POST', {});
  assert.equal(restarted.status, 200, JSON.stringify(restarted.body));
  const again = await deploymentEnd(berth.url, token, restarted.body.data.deployment_id, 120_000);
  assert.equal(again.state, 'success', again.failure_reason);
  assert.equal(again.type, 'service_update');
  const [fresh] = await replicasOf(svc.id, again.id);
  assert.ok(fresh, 'a new replica');
  assert.notEqual(fresh.id, back?.id);
  assert.equal(fresh.image, 'berth-test/echo:v1', 'the serving version');
  assert.ok(fresh.env.includes('API_KEY=docker-secret-one'));
  await pollUntil('the replaced replica to go', async () =>
    (await replicasOf(svc.id, restore.id)).length === 0 ? true : undefined,
  );
});
