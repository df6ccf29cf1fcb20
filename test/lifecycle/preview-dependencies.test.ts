import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { simTables } from '../../src/providers/sim/tables.ts';
import { captureVariables } from '../helpers/deployments.ts';
import { githubPullRequest, sendGithub } from '../helpers/git-webhooks.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Dependencies of git services come from the ops.json in the repository at the commit deployed (issue
 * 11, done-means 3): the service gets its normal and `skip_preview` resources, a pull request's preview
 * gets its normal and `preview_only` ones, made for it under names of its own (never the parent's),
 * each deployment as its commit's ops.json declares; closing the pull request deletes them. An invalid file fails the deployment naming the file and field.
 */
const SECRET = 'webhook-secret-of-previews';
const REPO = 'acme/shop-previews';
let h: Harness;
let t: Tenant;
/** The variables each deployment handed the provider, by deployment id. */
let applied: Map<string, Record<string, string>>;

before(async () => {
  h = await startHarness({ rateLimitPerMin: 100_000 });
  applied = captureVariables(h);
  await h.startWorker();
  t = await h.tenant();
  await h.gitConnection(t, 'github', { webhook_secret: SECRET });
});
after(() => h.close());

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies
type Json = Record<string, any>;
const servicesUrl = () => `/v1/environments/${t.envId}/services`;

/** Gives the simulated repository a file at `commit` ('' : at every commit without one of its own). */
async function commitFile(path: string, content: unknown, commit = '') {
  const text = typeof content === 'string' ? content : JSON.stringify(content);
  await simTables(h.deps.store.db)
    .insertInto('sim_repository_files')
    .values({ repo: REPO, commit_id: commit, path, content: text })
    .onConflict((oc) => oc.columns(['repo', 'path', 'commit_id']).doUpdateSet({ content: text }))
    .execute();
}

const bucket = (id: string, flags: Json = {}) => ({
  id,
  prefix: id,
  exports: { [`${id.toUpperCase().replace(/-/g, '_')}_BUCKET`]: '$name' },
  ...flags,
});
const OPS = {
  dependencies: {
    s3: {
      buckets: [
        bucket('files'),
        bucket('backups', { skip_preview: true }),
        bucket('fixtures', { preview_only: true }),
      ],
    },
  },
};

async function finished(id: string): Promise<Json> {
  return pollUntil(`deployment ${id} to end`, async () => {
    const d = (await h.request('GET', `/v1/deployments/${id}`, { token: t.token })).body.data.deployment;
    return d.state === 'success' || d.state === 'failed' ? d : undefined;
  });
}

async function deploy(serviceId: string, body: Json = {}): Promise<Json> {
  const res = await h.request('POST', `${servicesUrl()}/${serviceId}/deploy`, { token: t.token, body });
  assert.equal(res.status, 200, res.raw);
  return finished(res.body.data.deployment_id);
}

async function dependencies(serviceId: string): Promise<Json[]> {
  const res = await h.request('GET', `${servicesUrl()}/${serviceId}/dependencies`, { token: t.token });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.dependencies;
}

const ids = (deps: Json[]) => deps.map((d) => `${d.id}:${d.state}`).sort();

async function declared(serviceId: string): Promise<string[]> {
  const res = await h.request('GET', `${servicesUrl()}/${serviceId}`, { token: t.token });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.service.ops_dependencies.map((d: Json) => d.id);
}

async function create(body: Json): Promise<string> {
  const res = await h.request('POST', servicesUrl(), { token: t.token, body });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.service.id;
}

describe("a GitHub service's ops.json in its repository", () => {
  let parent: string;
  let parentDeps: Json[];
  let preview: Json;

  before(async () => {
    await commitFile('deploy/ops.json', OPS);
    parent = await create({
      ...VALID_SERVICE.github,
      name: 'Shop',
      git_repo_full_name: REPO,
      ops_json_path: 'deploy/ops.json',
      enable_previews: true,
    });
  });

  test('the service gets its normal and skip_preview resources, made before it starts, and GET service reports what it read', async () => {
    const deployment = await deploy(parent);
    assert.equal(deployment.state, 'success', deployment.failure_reason);
    parentDeps = await dependencies(parent);
    assert.deepEqual(ids(parentDeps), ['backups:available', 'files:available']);
    const variables = applied.get(deployment.id) ?? {};
    assert.match(variables.FILES_BUCKET ?? '', /^files-[0-9a-f]{8}$/);
    assert.match(variables.BACKUPS_BUCKET ?? '', /^backups-[0-9a-f]{8}$/);
    assert.equal(variables.FIXTURES_BUCKET, undefined);
    assert.deepEqual(await declared(parent), ['files', 'backups', 'fixtures']);
    // The branch head was resolved once: the commit built is the one whose ops.json was read.
    const [row] = await h.deps.store.db
      .selectFrom('deployments')
      .select('git_commit_ref')
      .where('id', '=', deployment.id)
      .execute();
    assert.match(row?.git_commit_ref ?? '', /^[0-9a-f]{40}$/);
    assert.equal(deployment.git_commit_ref, row?.git_commit_ref);
  });

  test("a pull request's preview gets its normal and preview_only resources under names of its own, read at the PR's commit", async () => {
    const sha = 'a1'.repeat(20);
    // The pull request's commit adds a queue: the preview reads its own commit's file.
    const atPr = structuredClone(OPS) as Json;
    atPr.dependencies.sqs = { queues: [{ id: 'jobs', exports: { JOBS_QUEUE: '$name' } }] };
    await commitFile('deploy/ops.json', atPr, sha);
    const pr = { repo: REPO, base: 'main', head: 'feature/cart', number: 41, sha };
    const opened = await sendGithub(h, SECRET, 'pull_request', githubPullRequest('opened', pr));
    assert.equal(opened.status, 200, opened.raw);
    const [previewId] = opened.body.data.preview_service_ids as string[];
    assert.ok(previewId);
    preview = (await h.request('GET', `${servicesUrl()}/${previewId}`, { token: t.token })).body.data.service;
    const deployments = await h.deps.store.db
      .selectFrom('deployments')
      .select('id')
      .where('service_id', '=', previewId)
      .execute();
    const deployment = await finished(deployments[0]?.id ?? '');
    assert.equal(deployment.state, 'success', deployment.failure_reason);
    assert.equal(deployment.git_commit_ref, sha);

    const previewDeps = await dependencies(previewId);
    assert.deepEqual(ids(previewDeps), ['files:available', 'fixtures:available', 'jobs:available']);
    const parentNames = parentDeps.map((d) => d.attributes.name);
    for (const d of previewDeps) {
      assert.ok(!parentNames.includes(d.attributes.name), `${d.id} is the preview's own, not the parent's`);
    }
    const variables = applied.get(deployment.id) ?? {};
    assert.match(variables.FILES_BUCKET ?? '', /^files-[0-9a-f]{8}$/);
    assert.notEqual(variables.FILES_BUCKET, parentDeps.find((d) => d.id === 'files')?.attributes.name);
    assert.match(variables.FIXTURES_BUCKET ?? '', /^fixtures-[0-9a-f]{8}$/);
    assert.equal(variables.BACKUPS_BUCKET, undefined);
    assert.deepEqual(await declared(previewId), ['files', 'backups', 'fixtures', 'jobs']);
    // The parent's resources and declaration are untouched.
    assert.deepEqual(await dependencies(parent), parentDeps);
    assert.deepEqual(await declared(parent), ['files', 'backups', 'fixtures']);
  });

  test("a new commit on the pull request brings the preview's resources in line with that commit's ops.json", async () => {
    // No file of its own at this commit: the repository's ops.json without the queue.
    const sha = 'c3'.repeat(20);
    const pr = { repo: REPO, base: 'main', head: 'feature/cart', number: 41, sha };
    const synced = await sendGithub(h, SECRET, 'pull_request', githubPullRequest('synchronize', pr));
    assert.deepEqual(synced.body.data.preview_service_ids, [preview.id]);
    const newest = await h.deps.store.db
      .selectFrom('deployments')
      .select('id')
      .where('service_id', '=', preview.id)
      .where('git_commit_ref', '=', sha)
      .executeTakeFirstOrThrow();
    const deployment = await finished(newest.id);
    assert.equal(deployment.state, 'success', deployment.failure_reason);
    assert.deepEqual(ids(await dependencies(preview.id)), ['files:available', 'fixtures:available']);
    assert.deepEqual(await declared(preview.id), ['files', 'backups', 'fixtures']);
    assert.equal(applied.get(deployment.id)?.JOBS_QUEUE, undefined);
  });

  test("closing the pull request deletes the preview's resources and leaves the parent's", async () => {
    const pr = { repo: REPO, base: 'main', head: 'feature/cart', number: 41, sha: 'c3'.repeat(20) };
    const closed = await sendGithub(h, SECRET, 'pull_request', githubPullRequest('closed', pr));
    assert.deepEqual(closed.body.data.deleted_service_ids, [preview.id]);
    // The delete job deletes the resources before the service: once it is deleted, all are gone.
    await pollUntil('the preview to be deleted', async () => {
      const res = await h.request('GET', `${servicesUrl()}/${preview.id}`, { token: t.token });
      return res.body.data.state === 'deleted' ? true : undefined;
    });
    const left = await simTables(h.deps.store.db)
      .selectFrom('sim_resources')
      .select('resource_id')
      .where('service_id', '=', preview.id)
      .execute();
    assert.deepEqual(left, []);
    const deleted = await simTables(h.deps.store.db)
      .selectFrom('sim_calls')
      .select('outcome')
      .where('service_id', '=', preview.id)
      .where('operation', '=', 'delete_resource')
      .execute();
    assert.deepEqual(deleted.map((c) => c.outcome).sort(), [
      's3.buckets files',
      's3.buckets fixtures',
      'sqs.queues jobs',
    ]);
    assert.deepEqual(await dependencies(parent), parentDeps);
  });
});

describe("a repository's ops.json that cannot be used", () => {
  test('an invalid file fails the deployment naming the file, the commit and the field; the resources stay as they were', async () => {
    const sha = 'b2'.repeat(20);
    await commitFile('ops.json', OPS);
    await commitFile('ops.json', { dependencies: { s3: { buckets: [{ id: '', exports: {} }] } } }, sha);
    const service = await create({
      ...VALID_SERVICE.github,
      name: 'Broken',
      git_repo_full_name: REPO,
      ops_json_path: 'ops.json',
    });
    const good = await deploy(service);
    assert.equal(good.state, 'success', good.failure_reason);
    const bad = await deploy(service, { commit_id: sha });
    assert.equal(bad.state, 'failed');
    assert.match(
      bad.failure_reason,
      new RegExp(
        `^The ops\\.json ops\\.json at commit ${sha.slice(0, 12)} of ${REPO} is invalid: ops\\.json\\.dependencies\\.s3\\.buckets\\[0\\]\\.id must be`,
      ),
    );
    assert.deepEqual(ids(await dependencies(service)), ['backups:available', 'files:available']);
  });

  test('a missing file fails the deployment naming ops_json_path', async () => {
    const service = await create({
      ...VALID_SERVICE.github,
      name: 'Missing',
      git_repo_full_name: REPO,
      ops_json_path: 'nowhere/ops.json',
    });
    const failed = await deploy(service);
    assert.equal(failed.state, 'failed');
    assert.match(
      failed.failure_reason,
      /^The ops\.json nowhere\/ops\.json at commit [0-9a-f]{12} of .+ does not exist \(ops_json_path\)$/,
    );
  });
});
