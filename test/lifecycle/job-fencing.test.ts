import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { jobHandlers } from '../../src/jobs/handlers/index.ts';
import { fencedClaim, LostClaimError } from '../../src/jobs/worker.ts';
import type { JobRow } from '../../src/store/schema.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * Issue 24 item 2: what a handler records on its subject commits only while its claim holds the job. An
 * attempt that lost the job (another worker claimed it after a long pause) changes nothing: it neither
 * starts a deployment for the holder, nor fails a subject the holder is working on.
 */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

/** The job of `subjectId` as claimed first by a worker that lost it, then by the one that holds it. */
async function takenOver(subjectId: string) {
  const { db } = h.deps.store;
  const job = await db
    .selectFrom('jobs')
    .selectAll()
    .where('subject_id', '=', subjectId)
    .executeTakeFirstOrThrow();
  const claimed = (workerId: string, attempts: number): JobRow => ({ ...job, locked_by: workerId, attempts });
  await db
    .updateTable('jobs')
    .set({ locked_by: 'holder', attempts: 2, locked_until: new Date(Date.now() + 60_000) })
    .where('seq', '=', job.seq)
    .execute();
  return {
    staleJob: claimed('stale', 1),
    stale: fencedClaim({ seq: job.seq, workerId: 'stale', attempts: 1 }),
    holderJob: claimed('holder', 2),
    holder: fencedClaim({ seq: job.seq, workerId: 'holder', attempts: 2 }),
  };
}

const jobOf = (subjectId: string) =>
  h.deps.store.db.selectFrom('jobs').select('seq').where('subject_id', '=', subjectId).executeTakeFirst();

async function newService(): Promise<string> {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  assert.equal(created.status, 200, created.raw);
  return created.body.data.service.id;
}

async function queuedDeployment(): Promise<string> {
  const serviceId = await newService();
  const res = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    token: t.token,
    body: {},
  });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.deployment_id;
}

const deploymentState = async (id: string) =>
  (await h.request('GET', `/v1/deployments/${id}`, { token: t.token })).body.data.deployment.state;

test('a deployment is started only by the attempt that holds its job, which then runs it to the end', async () => {
  const id = await queuedDeployment();
  const { staleJob, stale, holderJob, holder } = await takenOver(id);
  const deploy = jobHandlers(h.deps).deploy;
  await assert.rejects(deploy.run(staleJob, new AbortController().signal, stale), LostClaimError);
  assert.equal(await deploymentState(id), 'queued', 'the stale start rolled back');
  assert.ok(await jobOf(id), 'the job is still there for its holder');

  await deploy.run(holderJob, new AbortController().signal, holder);
  assert.equal(await deploymentState(id), 'success');
  assert.equal(holder.finished, true);
  assert.equal(await jobOf(id), undefined, 'ended with the deployment, in one commit');
});

test('an attempt that lost the job fails nothing: not a deployment, an environment or a delete', async () => {
  const handlers = jobHandlers(h.deps);
  const { db } = h.deps.store;

  const deploymentId = await queuedDeployment();
  const deploy = await takenOver(deploymentId);
  await assert.rejects(handlers.deploy.fail(deploy.staleJob, 'late', deploy.stale), LostClaimError);
  assert.equal(await deploymentState(deploymentId), 'queued');

  const env = await h.admin('POST', `/accounts/${t.accountId}/environments`, {
    name: 'fenced',
    cloud: 'aws',
  });
  assert.equal(env.status, 200, env.raw);
  const envId = env.body.data.environment.id as string;
  const provision = await takenOver(envId);
  await handlers.provision_environment.run(
    provision.holderJob,
    new AbortController().signal,
    provision.holder,
  );
  assert.equal(provision.holder.finished, true);
  await assert.rejects(
    handlers.provision_environment.fail(provision.staleJob, 'late', provision.stale),
    LostClaimError,
  );
  const envRow = await db
    .selectFrom('environments')
    .select('state')
    .where('id', '=', envId)
    .executeTakeFirst();
  assert.equal(envRow?.state, 'available', "the stale failure did not undo the holder's work");

  const serviceId = await newService();
  const removed = await h.request('DELETE', `/v1/environments/${t.envId}/services/${serviceId}`, {
    token: t.token,
  });
  assert.ok(removed.status < 300, removed.raw);
  const remove = await takenOver(serviceId);
  await assert.rejects(handlers.delete_service.fail(remove.staleJob, 'late', remove.stale), LostClaimError);
  const serviceRow = await db
    .selectFrom('services')
    .select('state')
    .where('id', '=', serviceId)
    .executeTakeFirst();
  assert.equal(serviceRow?.state, 'delete_pending');
});
