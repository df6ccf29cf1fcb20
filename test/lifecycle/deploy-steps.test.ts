import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import {
  failRun,
  keepHostDetails,
  noteRetry,
  recordOutcome,
  rollOut,
  startRun,
  watchForCancel,
} from '../../src/jobs/deploy-steps.ts';
import { DeploymentLogWriter } from '../../src/jobs/deployment-log.ts';
import { resolveDesiredState } from '../../src/jobs/desired-state.ts';
import { TerminalError } from '../../src/jobs/errors.ts';
import { jobHandlers } from '../../src/jobs/handlers/index.ts';
import { fencedClaim, LostClaimError } from '../../src/jobs/worker.ts';
import { type DesiredService, type Provider, SILENT_LOG } from '../../src/providers/provider.ts';
import { findDeploymentById, findDeploymentToRun } from '../../src/store/repositories/deployments.ts';
import { eventsAfter, latestEventSeq } from '../../src/store/repositories/events.ts';
import { enqueue } from '../../src/store/repositories/jobs.ts';
import type { JobRow } from '../../src/store/schema.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Issue 26 item 1: the deploy job's steps (deploy-steps.ts), each alone, and the one desired state
 * (desired-state.ts) that deploys, restarts, rollbacks and custom-domain changes all apply.
 */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

const BUCKET_OPS = {
  dependencies: {
    s3: { buckets: [{ id: 'files', prefix: 'files', exports: { BUCKET: '$name', BUCKET_ARN: '$arn' } }] },
  },
};

const NAMES = 'abcdefghijklmnopqrstuvwxyz';
let named = 0;
/** A docker service (with a secret, and a bucket its ops.json declares) and a deployment of it, queued. */
async function queued(options: { ops?: unknown } = {}) {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: {
      ...VALID_SERVICE.docker,
      name: `Steps ${NAMES[named++]}`,
      ...(options.ops ? { ops_json: JSON.stringify(options.ops) } : {}),
    },
  });
  assert.equal(created.status, 200, created.raw);
  const serviceUrl = `/v1/environments/${t.envId}/services/${created.body.data.service.id}`;
  const secret = `steps-secret-${randomUUID()}`;
  const put = await h.request('PUT', `${serviceUrl}/secrets`, {
    token: t.token,
    body: { secrets: [{ key: 'API_KEY', value: secret }] },
  });
  assert.equal(put.status, 200, put.raw);
  const res = await h.request('POST', `${serviceUrl}/deploy`, { token: t.token, body: {} });
  assert.equal(res.status, 200, res.raw);
  return { id: res.body.data.deployment_id as string, serviceUrl, secret };
}

/** The deployment's job, claimed by `workerId`, and the claim that fences it. */
async function claimed(deploymentId: string, workerId = 'steps') {
  const { db } = h.deps.store;
  const job = await db
    .selectFrom('jobs')
    .selectAll()
    .where('subject_id', '=', deploymentId)
    .executeTakeFirstOrThrow();
  await db
    .updateTable('jobs')
    .set({ locked_by: workerId, attempts: 1, locked_until: new Date(Date.now() + 60_000) })
    .where('seq', '=', job.seq)
    .execute();
  const row: JobRow = { ...job, locked_by: workerId, attempts: 1 };
  return { job: row, claim: fencedClaim({ seq: job.seq, workerId, attempts: 1 }) };
}

const subjectOf = async (id: string) => {
  const found = await findDeploymentToRun(h.deps.store.db, id);
  assert.ok(found, `deployment ${id}`);
  return found;
};
const logOf = (id: string) => new DeploymentLogWriter(h.deps.store.db, id, h.deps.logger);
const deploymentRow = async (id: string) => {
  const row = await findDeploymentById(h.deps.store.db, id);
  assert.ok(row);
  return row;
};
const logText = async (id: string) =>
  (await h.request('GET', `/v1/deployments/${id}/logs`, { token: t.token })).raw;

/** The harness's provider with `apply` replaced. */
function providerWith(apply: Provider['apply']): Provider {
  return Object.assign(Object.create(h.deps.provider) as Provider, { apply });
}

/** A deployment moved to in_progress by its step, ready for the rollout. */
async function started(options: { ops?: unknown } = {}) {
  const made = await queued(options);
  const { job, claim } = await claimed(made.id);
  const log = logOf(made.id);
  assert.equal(await startRun(h.deps.store.db, (await subjectOf(made.id)).deployment, job, claim, log), true);
  return { ...made, job, claim, log, subject: await subjectOf(made.id) };
}

test('startRun: a queued deployment starts (in the claim-held commit); a rerun notes itself; a cancelled one does not start', async () => {
  const { id, job, claim } = await (async () => {
    const made = await queued();
    return { ...made, ...(await claimed(made.id)) };
  })();
  const db = h.deps.store.db;
  const log = logOf(id);
  assert.equal(await startRun(db, (await subjectOf(id)).deployment, job, claim, log), true);
  assert.equal((await deploymentRow(id)).state, 'in_progress');
  assert.match(await logText(id), /Started \(attempt 1 of \d+\)/);

  const rerun = logOf(id);
  assert.equal(
    await startRun(db, (await subjectOf(id)).deployment, { ...job, attempts: 2 }, claim, rerun),
    true,
  );
  await rerun.flush();
  assert.match(await logText(id), /Started again \(attempt 2 of \d+\)/);

  const other = await queued();
  const cancelled = await h.request('POST', `/v1/deployments/${other.id}/cancel`, {
    token: t.token,
    body: {},
  });
  assert.equal(cancelled.status, 200, cancelled.raw);
  const otherJob: JobRow = { ...job, subject_id: other.id };
  const stale = (await subjectOf(other.id)).deployment;
  assert.equal(await startRun(db, { ...stale, state: 'queued' }, otherJob, claim, logOf(other.id)), false);
  assert.equal((await deploymentRow(other.id)).state, 'failed', 'the cancel stands');
});

test('startRun: an attempt that lost the job starts nothing (the start statement takes the fence)', async () => {
  const made = await queued();
  const { job, claim } = await claimed(made.id);
  const db = h.deps.store.db;
  await db.updateTable('jobs').set({ locked_by: 'another' }).where('subject_id', '=', made.id).execute();
  await assert.rejects(
    startRun(db, (await subjectOf(made.id)).deployment, job, claim, logOf(made.id)),
    LostClaimError,
  );
  assert.equal((await deploymentRow(made.id)).state, 'queued', 'the holder starts it');
  assert.doesNotMatch(await logText(made.id), /Started \(/);
});

test("watchForCancel: a first look of the caller (the run's one read) replaces the read of the flag", async () => {
  const { id } = await started();
  const reads = () => h.queries.filter((q) => q.startsWith('select "cancel_requested"')).length;
  const before = reads();
  const asked = await watchForCancel(h.deps.store, id, async () => true);
  asked.stop();
  assert.equal(asked.signal.aborted, true, 'a flag the caller found set aborts at once');
  const quiet = await watchForCancel(h.deps.store, id, async () => false);
  quiet.stop();
  assert.equal(quiet.signal.aborted, false);
  assert.equal(reads(), before, 'the flag is not read again');
});

test('watchForCancel: a cancel asked during the watch is heard (no timer polls the row); one asked before aborts at once', async () => {
  const { id } = await started();
  const reads = () => h.queries.filter((q) => q.startsWith('select "cancel_requested"')).length;
  const before = reads();
  const { notifications } = h.deps.store;
  const waits = notifications.armed;
  const quiet = await watchForCancel(h.deps.store, id);
  try {
    assert.equal(quiet.signal.aborted, false);
    assert.equal(notifications.armed, waits + 1, 'the watch waits for a notification');
    const asked = await h.request('POST', `/v1/deployments/${id}/cancel`, { token: t.token, body: {} });
    assert.equal(asked.status, 200, asked.raw);
    await pollUntil('the watch to hear the cancel', async () => (quiet.signal.aborted ? true : undefined));
    assert.equal(reads() - before, 2, 'the flag is read once at the start and once when the cancel is heard');
  } finally {
    quiet.stop();
  }
  assert.equal(notifications.armed, waits, 'a watch that heard the cancel waits no more');
  const late = await watchForCancel(h.deps.store, id);
  late.stop();
  assert.equal(late.signal.aborted, true, 'the flag is read before the first tick');
});

test('resolveDesiredState: secrets over dependency exports; the run records and provisions, a re-apply changes nothing', async () => {
  const { id, secret } = await queued({ ops: BUCKET_OPS });
  const subject = await subjectOf(id);
  const { db } = h.deps.store;
  const masked: string[] = [];
  const how = { signal: new AbortController().signal, log: SILENT_LOG };
  const nothingYet = await resolveDesiredState(h.deps, subject, how);
  assert.equal(nothingYet.variables.API_KEY, secret);
  assert.equal(nothingYet.variables.BUCKET, undefined, 'a re-apply makes no dependency');
  assert.equal((await deploymentRow(id)).variables_sealed, null, 'a re-apply records nothing');

  const run = await resolveDesiredState(h.deps, subject, {
    ...how,
    mask: (values) => masked.push(...values),
    run: true,
  });
  assert.equal(run.variables.API_KEY, secret);
  assert.ok(run.variables.BUCKET, 'the run makes the bucket and exports its name');
  assert.ok(masked.includes(secret));
  const row = await deploymentRow(id);
  assert.ok(row.variables_sealed);
  assert.deepEqual(JSON.parse(h.deps.secretBox.open(row.variables_sealed)), { API_KEY: secret });
  assert.equal(JSON.parse(row.ops_snapshot ?? 'null').dependencies.length, 1);
  assert.deepEqual(
    await resolveDesiredState(h.deps, { ...subject, deployment: row }, how),
    run,
    'a re-apply resolves the state the run resolved',
  );

  // A deployment in place whose ops.json no longer declares the bucket: re-applying it deletes nothing.
  const bare = {
    ...subject,
    deployment: {
      ...row,
      ops_snapshot: JSON.stringify({ ...JSON.parse(row.ops_snapshot ?? '{}'), dependencies: [] }),
    },
  };
  const resources = () =>
    db
      .selectFrom('service_resources')
      .select('resource_id')
      .where('service_id', '=', subject.service.id)
      .execute();
  const before = await resources();
  assert.equal((await resolveDesiredState(h.deps, bare, how)).variables.BUCKET, undefined);
  assert.deepEqual(await resources(), before, 'the bucket stays');
});

test('rollOut: applied; a TerminalError fails with its masked message; another error is thrown; a lost job gives no outcome; a cancel fails it as cancelled', async () => {
  const live = new AbortController().signal;
  const ok = await started();
  const applied = await rollOut(h.deps, ok.subject, live, ok.log);
  assert.ok(applied && 'applied' in applied && applied.applied.provDeploymentId);

  const refused = await started();
  const refusing = providerWith(async () => {
    throw new TerminalError(`the image refused to start with ${refused.secret}`);
  });
  const failed = await rollOut({ ...h.deps, provider: refusing }, refused.subject, live, refused.log);
  assert.deepEqual(failed, { failure: 'the image refused to start with [redacted]' });

  const flaky = providerWith(async () => {
    throw new Error('the engine is away');
  });
  await assert.rejects(rollOut({ ...h.deps, provider: flaky }, refused.subject, live, refused.log), /away/);

  const lost = new AbortController();
  const losing = providerWith(async () => {
    lost.abort();
    throw new Error('aborted');
  });
  assert.equal(
    await rollOut({ ...h.deps, provider: losing }, refused.subject, lost.signal, refused.log),
    undefined,
  );

  const cancelled = await started();
  const asked = await h.request('POST', `/v1/deployments/${cancelled.id}/cancel`, {
    token: t.token,
    body: {},
  });
  assert.equal(asked.status, 200, asked.raw);
  assert.deepEqual(await rollOut(h.deps, cancelled.subject, live, cancelled.log), { failure: 'cancelled' });
});

test('recordOutcome: success or failure, the service following, in the commit that ends the job', async () => {
  const ok = await started();
  await recordOutcome(
    h.deps,
    ok.subject,
    { applied: { provDeploymentId: 'p-1', namespaceName: 'ns', svcAlias: 'alias' } },
    ok.log,
    ok.claim,
  );
  const done = await deploymentRow(ok.id);
  assert.equal(done.state, 'success');
  assert.equal(done.prov_deployment_id, 'p-1');
  assert.equal(ok.claim.finished, true);
  const service = await h.request('GET', ok.serviceUrl, { token: t.token });
  assert.equal(service.body.data.service.state, 'running');

  const bad = await started();
  await recordOutcome(h.deps, bad.subject, { failure: 'cancelled' }, bad.log, bad.claim);
  const failed = await deploymentRow(bad.id);
  assert.equal(failed.state, 'failed');
  assert.equal(failed.failure_reason, 'cancelled');
  assert.match(await logText(bad.id), /Deployment cancelled/);
  assert.equal(bad.claim.finished, true);
});

test('recordOutcome: a deployment cancelled in progress moves its service once, onto the newest one not cancelled', async () => {
  const { id, serviceUrl, claim, log, subject } = await started();
  const serviceId = serviceUrl.split('/').at(-1) as string;
  const before = await latestEventSeq(h.deps.store.db, t.accountId);
  await recordOutcome(h.deps, subject, { failure: 'cancelled' }, log, claim);
  const moves = (await eventsAfter(h.deps.store.db, t.accountId, before, 100)).filter(
    (e) => e.type === 'service.updated' && (e.data as { id: string }).id === serviceId,
  );
  assert.equal(moves.length, 1, JSON.stringify(moves.map((e) => e.data)));
  const moved = moves[0]?.data as { state: string; latest_deployment_id: string | null };
  assert.equal(moved.state, 'deploy_pending', 'no deployment before it: the service was never deployed');
  assert.equal(moved.latest_deployment_id, null);
  assert.equal((await deploymentRow(id)).failure_reason, 'cancelled');
});

test('noteRetry: the retried reason shows on the deployment and in its log, secret values masked', async () => {
  const { id, secret, job } = await started();
  await noteRetry(h.deps, { ...job, attempts: 2, max_attempts: 8 }, `the registry answered 503 to ${secret}`);
  const row = await deploymentRow(id);
  assert.equal(row.state, 'in_progress');
  assert.equal(
    row.failure_reason,
    'Attempt 2 of 8 failed, retrying: the registry answered 503 to [redacted]',
  );
  const text = await logText(id);
  assert.match(text, /Attempt 2 of 8 failed, retrying: the registry answered 503 to \[redacted\]/);
  assert.equal(text.includes(secret), false);
});

test('failRun: the deployment fails with the masked reason in the commit that ends the job; a lost claim fails nothing', async () => {
  const lost = await started();
  const { db } = h.deps.store;
  await db.updateTable('jobs').set({ locked_by: 'another' }).where('subject_id', '=', lost.id).execute();
  await assert.rejects(failRun(h.deps, lost.job, 'gave up', lost.claim), LostClaimError);
  assert.equal((await deploymentRow(lost.id)).state, 'in_progress', 'the holder finishes it');

  const { id, secret, job, claim, serviceUrl } = await started();
  await failRun(h.deps, { ...job, attempts: 8, max_attempts: 8 }, `no route to ${secret}`, claim);
  const row = await deploymentRow(id);
  assert.equal(row.state, 'failed');
  assert.equal(row.failure_reason, 'The provider kept failing: no route to [redacted]');
  assert.equal(claim.finished, true);
  const service = await h.request('GET', serviceUrl, { token: t.token });
  assert.equal(service.body.data.service.state, 'deploy_failed');
  assert.match(await logText(id), /Deployment failed: The provider kept failing: no route to \[redacted\]/);
});

test('keepHostDetails: a pushed commit keeps the author and message its host recorded', () => {
  const source = { git_commit_ref: 'abc', git_commit_author: 'sim', git_commit_message: 'sim says' };
  assert.deepEqual(keepHostDetails({ git_commit_ref: 'abc', git_commit_author: 'Ada' }, source), {
    git_commit_ref: 'abc',
  });
  assert.deepEqual(keepHostDetails({ git_commit_ref: 'def', git_commit_author: 'Ada' }, source), source);
  assert.deepEqual(keepHostDetails({ git_commit_ref: '', git_commit_author: '' }, source), source);
  assert.deepEqual(keepHostDetails({ git_commit_ref: '', git_commit_author: '' }, undefined), {});
});

test('a custom-domain change applies the desired state the deployment ran with (its dependency exports too) and the new domain', async () => {
  const { id, secret } = await queued({ ops: BUCKET_OPS });
  const { job, claim } = await claimed(id);
  const handlers = jobHandlers(h.deps);
  await handlers.deploy.run(job, new AbortController().signal, claim);
  const ran = await deploymentRow(id);
  assert.equal(ran.state, 'success', ran.failure_reason);

  const domain = await h.deps.store.db
    .insertInto('custom_domains')
    .values({
      id: randomUUID(),
      account_id: ran.account_id,
      environment_id: ran.environment_id,
      service_id: ran.service_id,
      domain: `steps-${randomUUID().slice(0, 8)}.example.com`,
      state: 'verified',
      verify_token: 'v',
      validation_token: 'v',
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await enqueue(h.deps.store.db, {
    kind: 'deploy_custom_domain',
    subjectId: domain.id,
    accountId: ran.account_id,
    queueKey: ran.service_id,
  });
  const seen: DesiredService[] = [];
  const provider = h.deps.provider;
  const recording = providerWith((desired, signal, log) => {
    seen.push(desired);
    return provider.apply(desired, signal, log);
  });
  const domainJob = await claimed(domain.id);
  await jobHandlers({ ...h.deps, provider: recording }).deploy_custom_domain.run(
    domainJob.job,
    new AbortController().signal,
    domainJob.claim,
  );
  const [desired] = seen;
  assert.ok(desired);
  assert.equal(desired.deploymentId, id, 'the serving deployment, so the same generation');
  assert.deepEqual(desired.domains, [domain.domain]);
  assert.equal(desired.variables.API_KEY, secret);
  assert.ok(desired.variables.BUCKET, 'the dependency exports the deployment ran with');
  const after = await h.deps.store.db
    .selectFrom('custom_domains')
    .select('state')
    .where('id', '=', domain.id)
    .executeTakeFirstOrThrow();
  assert.equal(after.state, 'deployed');
});
