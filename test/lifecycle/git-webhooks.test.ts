import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  githubPullRequest,
  githubPush,
  gitlabPush,
  sendGithub,
  sendGitlab,
} from '../helpers/git-webhooks.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Webhooks in (issue 12): signed deliveries from GitHub and GitLab deploy auto_deploy services on push
 * and manage pull-request previews; a redelivery does nothing; a bad signature is a 401 that writes
 * nothing; another account's services on the same repository are never touched.
 */
const SECRET = 'webhook-secret-of-acme';
const OTHER_SECRET = 'webhook-secret-of-other';
let h: Harness;
let t: Tenant;
let other: Tenant;
let githubConnection: string;

before(async () => {
  h = await startHarness({ rateLimitPerMin: 100_000 });
  await h.startWorker();
  t = await h.tenant();
  other = await h.tenant();
  githubConnection = await h.gitConnection(t, 'github', { webhook_secret: SECRET });
  await h.gitConnection(t, 'gitlab', { webhook_secret: SECRET });
  await h.gitConnection(other, 'github', { webhook_secret: OTHER_SECRET });
});
after(() => h.close());

async function create(tenant: Tenant, body: Record<string, unknown>): Promise<string> {
  const res = await h.request('POST', `/v1/environments/${tenant.envId}/services`, {
    token: tenant.token,
    body,
  });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.service.id;
}

const deploymentsOf = (serviceId: string) =>
  h.deps.store.db.selectFrom('deployments').selectAll().where('service_id', '=', serviceId).execute();

const finished = (id: string) =>
  pollUntil(`deployment ${id} to finish`, async () => {
    const d = await h.request('GET', `/v1/deployments/${id}`, { token: t.token });
    const state = d.body.data.deployment.state;
    return state === 'success' || state === 'failed' ? d.body.data.deployment : undefined;
  });

describe('push', () => {
  const repo = 'acme/shop';
  let web: string;
  let worker: string;
  let manual: string;
  let elsewhere: string;

  before(async () => {
    const git = { ...VALID_SERVICE.github, git_repo_full_name: repo, git_repo_branch: 'main' };
    web = await create(t, { ...git, name: 'Shop Web', auto_deploy: true });
    worker = await create(t, { ...git, name: 'Shop Worker', type: 'worker', auto_deploy: true });
    manual = await create(t, { ...git, name: 'Shop Manual', auto_deploy: false });
    elsewhere = await create(other, { ...git, name: 'Other Shop', auto_deploy: true });
  });

  test('a signed push deploys each auto_deploy service on the branch at the pushed commit, audited as GitHub push', async () => {
    const sha = 'a'.repeat(40);
    const delivery = randomUUID();
    const res = await sendGithub(
      h,
      SECRET,
      'push',
      githubPush('Acme/Shop', 'main', sha, 'Add the cart\n'),
      delivery,
    );
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.deployment_ids.length, 2);
    for (const service of [web, worker]) {
      const [deployment] = await deploymentsOf(service);
      assert.ok(deployment, 'deployed');
      assert.equal(deployment.git_commit_ref, sha);
      const done = await finished(deployment.id);
      assert.equal(done.state, 'success', done.failure_reason);
      assert.equal(done.git_commit_ref, sha);
      assert.equal(done.git_commit_author, 'Dev Eloper <dev@acme.test>');
      assert.equal(done.git_commit_message, 'Add the cart');
      // The log names the commit as the record does: the pushed author and message, not the sim's own.
      const log = await h.request('GET', `/v1/deployments/${deployment.id}/logs`, { token: t.token });
      const lines = log.body.data.lines.map((l: { line: string }) => l.line).join('\n');
      assert.match(lines, new RegExp(`Commit ${sha} by Dev Eloper <dev@acme\\.test>: Add the cart`));
      assert.doesNotMatch(lines, /Sim Developer|Simulated commit/);
    }
    assert.deepEqual(await deploymentsOf(manual), [], 'auto_deploy false: not deployed');
    assert.deepEqual(await deploymentsOf(elsewhere), [], "another account's service: not deployed");
    const audit = await h.deps.store.db
      .selectFrom('audit_logs')
      .select(['actor', 'action', 'request_id', 'token_id'])
      .where('request_id', '=', delivery)
      .execute();
    assert.deepEqual(
      audit,
      [1, 2].map(() => ({
        actor: 'GitHub push',
        action: 'deployment.create',
        request_id: delivery,
        token_id: null,
      })),
    );

    // The same delivery again (GitHub's "Redeliver"): nothing more.
    const again = await sendGithub(h, SECRET, 'push', githubPush(repo, 'main', sha), delivery);
    assert.equal(again.status, 200, again.raw);
    assert.equal(again.body.data.duplicate, true);
    assert.equal((await deploymentsOf(web)).length, 1);
  });

  test('a bad signature is a 401 that writes nothing; a push to another branch deploys nothing', async () => {
    const deliveries = await h.deps.store.db.selectFrom('git_deliveries').selectAll().execute();
    const delivery = randomUUID();
    for (const secret of ['not-the-secret-at-all', '']) {
      const res = await sendGithub(h, secret, 'push', githubPush(repo, 'main', 'b'.repeat(40)), delivery);
      assert.equal(res.status, 401, res.raw);
      assert.equal(res.body.error_code, 'unauthorized');
    }
    const unsigned = await h.request('POST', '/hooks/github', {
      body: githubPush(repo, 'main', 'b'.repeat(40)),
      headers: { 'x-github-event': 'push', 'x-github-delivery': delivery },
    });
    assert.equal(unsigned.status, 401);
    assert.deepEqual(await h.deps.store.db.selectFrom('git_deliveries').selectAll().execute(), deliveries);
    assert.equal((await deploymentsOf(web)).length, 1);

    const feature = await sendGithub(h, SECRET, 'push', githubPush(repo, 'feature/x', 'c'.repeat(40)));
    assert.equal(feature.status, 200, feature.raw);
    assert.deepEqual(feature.body.data.deployment_ids, []);
    assert.equal((await deploymentsOf(web)).length, 1);
  });

  test('a body nested deeper than any host sends is never a 5xx: unsigned 401, signed ignored', async () => {
    const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
    const unsigned = await h.request('POST', '/hooks/github', {
      rawBody: deep,
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-github-delivery': randomUUID(),
      },
    });
    assert.equal(unsigned.status, 401, unsigned.raw);
    // Unreadable, it names no installation or repository: only a connection's own URL takes it.
    assert.equal((await sendGithub(h, SECRET, 'push', deep)).status, 401);
    const signed = await sendGithub(h, SECRET, 'push', deep, randomUUID(), githubConnection);
    assert.equal(signed.status, 200, signed.raw);
    assert.equal(signed.body.data.ignored, 'a push payload without its fields');
    assert.deepEqual(signed.body.data.deployment_ids, []);
  });

  test('GitLab: X-Gitlab-Token names the connection; a wrong token is a 401', async () => {
    const lab = await create(t, {
      ...VALID_SERVICE.gitlab,
      name: 'Lab Worker',
      git_repo_full_name: 'acme/lab',
      auto_deploy: true,
    });
    assert.equal(
      (await sendGitlab(h, 'wrong-token-of-sixteen', gitlabPush('acme/lab', 'main', 'd'.repeat(40)))).status,
      401,
    );
    const res = await sendGitlab(h, SECRET, gitlabPush('acme/lab', 'main', 'd'.repeat(40), 'Lab change'));
    assert.equal(res.status, 200, res.raw);
    const [deployment] = await deploymentsOf(lab);
    assert.equal(deployment?.git_commit_ref, 'd'.repeat(40));
    assert.equal(deployment?.git_commit_author, 'Lab Dev <lab@acme.test>');
    const audit = await h.deps.store.db
      .selectFrom('audit_logs')
      .select('actor')
      .where('resource_id', '=', deployment?.id ?? '')
      .executeTakeFirst();
    assert.equal(audit?.actor, 'GitLab push');
  });
});

describe('pull requests', () => {
  const repo = 'acme/site';
  let parent: string;
  let noPreviews: string;

  before(async () => {
    const git = { ...VALID_SERVICE.github, git_repo_full_name: repo, git_repo_branch: 'main' };
    parent = await create(t, { ...git, name: 'Site', enable_previews: true });
    noPreviews = await create(t, { ...git, name: 'Site Copy', enable_previews: false });
  });

  const previewsOf = (id: string) =>
    h.deps.store.db
      .selectFrom('services')
      .selectAll()
      .where('parent_service_id', '=', id)
      .where('is_deleted', '=', false)
      .execute();

  test('opened creates the preview, synchronize updates it, closed deletes it; enable_previews false ignores them', async () => {
    const pr = { repo, base: 'main', head: 'feature/login', number: 7 };
    const opened = await sendGithub(
      h,
      SECRET,
      'pull_request',
      githubPullRequest('opened', { ...pr, sha: 'e'.repeat(40) }),
    );
    assert.equal(opened.status, 200, opened.raw);
    const [preview] = await previewsOf(parent);
    assert.ok(preview);
    assert.deepEqual(opened.body.data.preview_service_ids, [preview.id]);
    assert.equal(preview.name, 'Site (PR#7)');
    assert.equal(preview.git_repo_branch, 'feature/login');
    assert.equal(preview.pr_number, 7);
    assert.deepEqual(await previewsOf(noPreviews), []);
    const first = (await deploymentsOf(preview.id))[0];
    assert.equal(first?.git_commit_ref, 'e'.repeat(40));
    await finished(first?.id ?? '');

    const synced = await sendGithub(
      h,
      SECRET,
      'pull_request',
      githubPullRequest('synchronize', { ...pr, sha: 'f'.repeat(40) }),
    );
    assert.deepEqual(synced.body.data.preview_service_ids, [preview.id], 'the same preview (is_new: false)');
    assert.equal((await previewsOf(parent)).length, 1);
    const commits = (await deploymentsOf(preview.id)).map((d) => d.git_commit_ref).sort();
    assert.deepEqual(commits, ['e'.repeat(40), 'f'.repeat(40)]);
    const audit = await h.deps.store.db
      .selectFrom('audit_logs')
      .select(['actor', 'action'])
      .where('resource_id', '=', preview.id)
      .orderBy('created_at')
      .execute();
    assert.deepEqual(audit, [
      { actor: 'GitHub pull request', action: 'deployment.preview.create' },
      { actor: 'GitHub pull request', action: 'deployment.preview' },
    ]);

    const closed = await sendGithub(
      h,
      SECRET,
      'pull_request',
      githubPullRequest('closed', { ...pr, sha: 'f'.repeat(40) }),
    );
    assert.deepEqual(closed.body.data.deleted_service_ids, [preview.id]);
    await pollUntil('the preview to be deleted', async () => {
      const res = await h.request('GET', `/v1/environments/${t.envId}/services/${preview.id}`, {
        token: t.token,
      });
      return res.body.data.state === 'deleted' ? true : undefined;
    });
    assert.equal(
      (await h.request('GET', `/v1/environments/${t.envId}/services/${parent}`, { token: t.token })).body.data
        .state !== 'deleted',
      true,
    );
  });
});
