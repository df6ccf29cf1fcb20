import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { resolveDesiredState } from '../../src/jobs/desired-state.ts';
import { SILENT_LOG } from '../../src/providers/provider.ts';
import { simTables } from '../../src/providers/sim/tables.ts';
import { findDeploymentById } from '../../src/store/repositories/deployments.ts';
import { findEnvironmentById } from '../../src/store/repositories/environments.ts';
import { findServiceById } from '../../src/store/repositories/services.ts';
import type { EnvironmentRow, ServiceRow } from '../../src/store/schema.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/** Cancel, rollback and restart on the sim provider. */
let h: Harness;
let t: Tenant;
before(async () => {
  // Long enough steps that a deployment can be caught queued and in progress.
  h = await startHarness({ providerEnv: { BERTH_SIM_STEP_MS: '1000' } });
  await h.startWorker();
  t = await h.tenant();
});
after(() => h.close());

async function createService(secret: string) {
  const res = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, replica_count: 1, secrets: [{ key: 'API_KEY', value: secret }] },
  });
  assert.equal(res.status, 200, res.raw);
  return `/v1/environments/${t.envId}/services/${res.body.data.service.id}`;
}

async function deploy(serviceUrl: string, tag: string): Promise<string> {
  const res = await h.request('POST', `${serviceUrl}/deploy`, {
    token: t.token,
    body: { docker_image_tag: tag },
  });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.deployment_id;
}

async function getDeployment(id: string) {
  return (await h.request('GET', `/v1/deployments/${id}`, { token: t.token })).body.data.deployment;
}

async function ended(id: string) {
  return pollUntil(`deployment ${id} to end`, async () => {
    const d = await getDeployment(id);
    return d.state === 'success' || d.state === 'failed' ? d : undefined;
  });
}

async function workload(serviceUrl: string) {
  const serviceId = serviceUrl.split('/').at(-1) as string;
  return simTables(h.deps.store.db)
    .selectFrom('sim_workloads')
    .selectAll()
    .where('service_id', '=', serviceId)
    .executeTakeFirst();
}

test('cancel: a queued deployment never runs; one in progress stops before traffic moves; a terminal one is 409', async () => {
  const serviceUrl = await createService('cancel-secret-value');
  const first = await deploy(serviceUrl, 'v1');
  assert.equal((await ended(first)).state, 'success');

  const running = await deploy(serviceUrl, 'v2');
  const queued = await deploy(serviceUrl, 'v3');
  const cancelQueued = await h.request('POST', `/v1/deployments/${queued}/cancel`, {
    token: t.token,
    body: {},
  });
  assert.equal(cancelQueued.status, 200, cancelQueued.raw);
  assert.equal(cancelQueued.body.data.deployment.state, 'failed');
  assert.equal(cancelQueued.body.data.deployment.failure_reason, 'cancelled');

  await pollUntil('the second deployment to start', async () =>
    (await getDeployment(running)).state === 'in_progress' ? true : undefined,
  );
  const cancelRunning = await h.request('POST', `/v1/deployments/${running}/cancel`, {
    token: t.token,
    body: {},
  });
  assert.equal(cancelRunning.status, 200, cancelRunning.raw);
  const stopped = await ended(running);
  assert.equal(stopped.state, 'failed');
  assert.equal(stopped.failure_reason, 'cancelled');
  assert.equal((await workload(serviceUrl))?.target, 'v1', 'traffic never moved to the cancelled deployment');
  const service = (await h.request('GET', serviceUrl, { token: t.token })).body.data.service;
  assert.equal(service.state, 'running', 'v1 still serves: a cancel is no failure');
  assert.equal(service.latest_deployment.id, first);
  const ops = await h.request('GET', `/v1/deployments/${running}/operations`, { token: t.token });
  assert.equal(
    ops.body.data.operations.some((o: { step: string }) => o.step === 'traffic'),
    false,
  );
  const log = await h.request('GET', `/v1/deployments/${running}/logs`, { token: t.token });
  assert.equal(log.body.data.lines.at(-1).line, 'Deployment cancelled');

  const calls = await simTables(h.deps.store.db)
    .selectFrom('sim_calls')
    .select('operation')
    .where('subject_id', '=', queued)
    .execute();
  assert.deepEqual(calls, [], 'the queued deployment never reached the provider');

  for (const id of [first, queued, running]) {
    const again = await h.request('POST', `/v1/deployments/${id}/cancel`, { token: t.token, body: {} });
    assert.equal(again.status, 409, again.raw);
    assert.equal(again.body.error_code, 'conflict');
  }
});

test('a cancelled queued deployment is no failure: the service follows the one before it, and no alert opens', async () => {
  const serviceUrl = await createService('cancel-state-secret');
  const first = await deploy(serviceUrl, 'v1');
  assert.equal((await ended(first)).state, 'success');
  const running = await deploy(serviceUrl, 'v2');
  const queued = await deploy(serviceUrl, 'v3');
  const cancel = await h.request('POST', `/v1/deployments/${queued}/cancel`, { token: t.token, body: {} });
  assert.equal(cancel.status, 200, cancel.raw);
  const service = async () => (await h.request('GET', serviceUrl, { token: t.token })).body.data.service;
  const meanwhile = await service();
  assert.notEqual(meanwhile.state, 'deploy_failed', 'v2 is still on its way');
  assert.equal(meanwhile.latest_deployment.id, running, 'the latest deployment not cancelled');

  assert.equal((await ended(running)).state, 'success');
  const after = await pollUntil('the service to follow v2', async () => {
    const s = await service();
    return s.state === 'running' ? s : undefined;
  });
  assert.equal(after.latest_deployment.id, running);
  const alerts = await h.request('GET', `${serviceUrl}/alerts`, { token: t.token });
  assert.deepEqual(alerts.body.data.alerts, [], 'a cancel opens no deploy_failed alert');
});

test('rollback restores the earlier image, ops and secret values; restart runs the serving version again', async () => {
  const serviceUrl = await createService('rollback-secret-one');
  const none = await h.request('POST', `${serviceUrl}/rollback`, { token: t.token, body: {} });
  assert.equal(none.status, 409, none.raw);
  const nothing = await h.request('POST', `${serviceUrl}/restart`, { token: t.token, body: {} });
  assert.equal(nothing.status, 409, nothing.raw);

  const v1 = await deploy(serviceUrl, 'v1');
  assert.equal((await ended(v1)).state, 'success');
  const put = await h.request('PUT', `${serviceUrl}/secrets`, {
    token: t.token,
    body: { secrets: [{ key: 'API_KEY', value: 'rollback-secret-two' }] },
  });
  assert.equal(put.status, 200, put.raw);
  const v2 = await deploy(serviceUrl, 'v2');
  assert.equal((await ended(v2)).state, 'success');
  const broken = await deploy(serviceUrl, 'fail-now');
  assert.equal((await ended(broken)).state, 'failed');
  const notThat = await h.request('POST', `${serviceUrl}/rollback`, {
    token: t.token,
    body: { deployment_id: broken },
  });
  assert.equal(notThat.status, 422, notThat.raw);
  assert.equal(notThat.body.errors[0].field, 'deployment_id');

  const res = await h.request('POST', `${serviceUrl}/rollback`, { token: t.token, body: {} });
  assert.equal(res.status, 200, res.raw);
  const restoreId = res.body.data.deployment_id;
  const restore = await ended(restoreId);
  assert.equal(restore.state, 'success', restore.failure_reason);
  assert.equal(restore.type, 'restore');
  assert.equal(restore.docker_image_tag, 'v1');
  assert.equal((await workload(serviceUrl))?.target, 'v1', 'the old image runs again');
  // What the provider was handed for the restore: the secret as it was at v1.
  const row = await findDeploymentById(h.deps.store.db, restoreId);
  const service = (await findServiceById(h.deps.store.db, row?.service_id as string)) as ServiceRow;
  const environment = (await findEnvironmentById(h.deps.store.db, t.envId)) as EnvironmentRow;
  const desired = await resolveDesiredState(
    h.deps,
    { deployment: row as never, service, environment },
    { signal: new AbortController().signal, log: SILENT_LOG },
  );
  assert.equal(desired.variables.API_KEY, 'rollback-secret-one');
  const log = await h.request('GET', `/v1/deployments/${restoreId}/logs`, { token: t.token });
  assert.match(log.body.data.lines[0].line, new RegExp(`^A restore deployment \\(bringing back ${v1}\\)`));
  assert.equal(log.raw.includes('rollback-secret'), false, 'no secret value in the log');

  const restarted = await h.request('POST', `${serviceUrl}/restart`, { token: t.token, body: {} });
  assert.equal(restarted.status, 200, restarted.raw);
  const again = await ended(restarted.body.data.deployment_id);
  assert.equal(again.state, 'success', again.failure_reason);
  // A type the hosted API's Deployment schema allows (update, restore, service_update), and not the
  // rollbacks' restore (contract): a restart runs the serving deployment again, its note says so.
  assert.equal(again.type, 'service_update');
  assert.equal(again.note, `Restart of ${restore.id}`);
  const restartLog = await h.request('GET', `/v1/deployments/${again.id}/logs`, { token: t.token });
  assert.match(
    restartLog.body.data.lines[0].line,
    new RegExp(`^A restart \\(running ${restore.id} again\\)`),
  );
  assert.equal(again.docker_image_tag, 'v1', 'the serving version');
  const now = await workload(serviceUrl);
  assert.equal(now?.deployment_id, again.id, 'new replicas of the same version');
  assert.equal(now?.target, 'v1');
});
