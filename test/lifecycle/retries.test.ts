import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TerminalError } from '../../src/jobs/errors.ts';
import type { DesiredService } from '../../src/providers/provider.ts';
import { simTables } from '../../src/providers/sim/tables.ts';
import { claim, complete, retryLater } from '../../src/store/repositories/jobs.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/** Provider errors: retried with backoff when retryable, failed for good otherwise; lapsed leases are retaken. */
let h: Harness;
let t: Tenant;
before(async () => {
  // The workers' own leases are long enough for a loaded machine to renew (a renewal not confirmed within
  // 4/5 of a 1 s lease aborted a running apply, which then ran a third time): the lapsed leases these
  // tests take over are claimed with short leases of their own.
  h = await startHarness({ jobLeaseMs: 5000 });
  t = await h.tenant();
});
after(() => h.close());

async function deployOnce(body: Record<string, unknown> = {}) {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  const serviceId = created.body.data.service.id;
  const res = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    token: t.token,
    body,
  });
  return { serviceId, deploymentId: res.body.data.deployment_id as string };
}

async function ended(id: string) {
  return pollUntil(`deployment ${id} to end`, async () => {
    const d = (await h.request('GET', `/v1/deployments/${id}`, { token: t.token })).body.data.deployment;
    return d.state === 'success' || d.state === 'failed' ? d : undefined;
  });
}

test('a job whose worker died (its lease lapsed) is claimed again and completes', async () => {
  const { deploymentId } = await deployOnce({ docker_image_tag: 'orphan' });
  // A worker that claims the job and then vanishes: the job stays leased to it until the lease lapses.
  let orphaned = false;
  await pollUntil('a ghost worker to claim the job', async () => {
    const job = await claim(h.deps.store.db, 'ghost-worker', 1000);
    if (job?.subject_id === deploymentId) orphaned = true;
    return orphaned ? true : undefined;
  });
  await h.startWorker();
  const end = await ended(deploymentId);
  assert.equal(end.state, 'success');
  const calls = await simTables(h.deps.store.db)
    .selectFrom('sim_calls')
    .select('worker')
    .where('subject_id', '=', deploymentId)
    .execute();
  assert.equal(calls.length, 1, 'the real worker ran it once');
});

test('a retryable provider error is retried and the deployment then succeeds; a terminal one fails it at once', async () => {
  const provider = h.deps.provider;
  const realApply = provider.apply.bind(provider);
  const attempts = new Map<string, number>();
  provider.apply = async (request: DesiredService, signal: AbortSignal) => {
    const n = (attempts.get(request.deploymentId) ?? 0) + 1;
    attempts.set(request.deploymentId, n);
    if (request.target.docker_image_tag === 'flaky' && n === 1) {
      throw new Error('the cloud API timed out');
    }
    if (request.target.docker_image_tag === 'broken') {
      throw new TerminalError('the image does not exist');
    }
    return realApply(request, signal);
  };

  const flaky = await deployOnce({ docker_image_tag: 'flaky' });
  const broken = await deployOnce({ docker_image_tag: 'broken' });
  const [flakyEnd, brokenEnd] = await Promise.all([ended(flaky.deploymentId), ended(broken.deploymentId)]);

  assert.equal(flakyEnd.state, 'success');
  assert.equal(attempts.get(flaky.deploymentId), 2, 'retried once');
  assert.equal(brokenEnd.state, 'failed');
  assert.equal(attempts.get(broken.deploymentId), 1, 'a terminal error is not retried');
  assert.match(brokenEnd.failure_reason, /the image does not exist/);
  const service = await h.request('GET', `/v1/environments/${t.envId}/services/${broken.serviceId}`, {
    token: t.token,
  });
  assert.equal(service.body.data.state, 'deploy_failed');
  const leftover = await h.deps.store.db
    .selectFrom('jobs')
    .select('seq')
    .where('subject_id', 'in', [flaky.deploymentId, broken.deploymentId])
    .execute();
  assert.deepEqual(leftover, [], 'finished jobs are removed');
});

/** A second app with no worker running, so these tests decide who claims what. */
async function quietHarness(ctx: { after: (fn: () => Promise<void>) => void }) {
  const quiet = await startHarness({ jobLeaseMs: 1000 });
  ctx.after(() => quiet.close());
  const tenant = await quiet.tenant();
  const created = await quiet.request('POST', `/v1/environments/${tenant.envId}/services`, {
    token: tenant.token,
    body: VALID_SERVICE.docker,
  });
  const res = await quiet.request(
    'POST',
    `/v1/environments/${tenant.envId}/services/${created.body.data.service.id}/deploy`,
    {
      token: tenant.token,
      body: {},
    },
  );
  return { quiet, tenant, deploymentId: res.body.data.deployment_id as string };
}

test('a worker that lost its lease cannot complete or release the job another worker now holds', async (ctx) => {
  const { quiet, deploymentId } = await quietHarness(ctx);
  const db = quiet.deps.store.db;
  const first = await pollUntil('a first claim', async () => {
    const job = await claim(db, 'worker-a', 200);
    return job?.subject_id === deploymentId ? job : undefined;
  });
  const second = await pollUntil('the lapsed lease to be claimed again', async () => {
    const job = await claim(db, 'worker-b', 60_000);
    return job?.subject_id === deploymentId ? job : undefined;
  });
  const stale = { seq: first.seq, workerId: 'worker-a', attempts: first.attempts };
  assert.equal(await complete(db, stale), false, 'the stale worker cannot remove the job');
  await retryLater(db, stale, 'late failure');
  const row = await db.selectFrom('jobs').selectAll().where('seq', '=', second.seq).executeTakeFirstOrThrow();
  assert.equal(row.locked_by, 'worker-b', 'nor release it');
  assert.equal(
    await complete(db, { seq: second.seq, workerId: 'worker-b', attempts: second.attempts }),
    true,
  );
});

test('a job claimed more times than it may run fails its deployment instead of running again', async (ctx) => {
  const { quiet, tenant, deploymentId } = await quietHarness(ctx);
  // As if its workers had died every time: the attempts are used up.
  await quiet.deps.store.db
    .updateTable('jobs')
    .set({ attempts: 8, last_error: 'the worker vanished' })
    .where('subject_id', '=', deploymentId)
    .execute();
  await quiet.startWorker();
  const end = await pollUntil('the deployment to end', async () => {
    const d = (await quiet.request('GET', `/v1/deployments/${deploymentId}`, { token: tenant.token })).body
      .data.deployment;
    return d.state === 'success' || d.state === 'failed' ? d : undefined;
  });
  assert.equal(end.state, 'failed');
  assert.match(end.failure_reason, /the worker vanished/);
  const calls = await simTables(quiet.deps.store.db)
    .selectFrom('sim_calls')
    .select('id')
    .where('subject_id', '=', deploymentId)
    .execute();
  assert.deepEqual(calls, [], 'it never reached the provider');
});
