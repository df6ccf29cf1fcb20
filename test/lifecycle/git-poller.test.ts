import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pollGitHeads, startGitPoller } from '../../src/jobs/git-poller.ts';
import { createRepo, pushCommit } from '../helpers/git.ts';
import { githubPush, sendGithub } from '../helpers/git-webhooks.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * The opt-in git poller (BERTH_GIT_POLL_INTERVAL_MS): `git ls-remote` of each auto_deploy branch; a new
 * head deploys within two intervals, and pollers racing on the same head deploy it once.
 */
const INTERVAL_MS = 1000;
let h: Harness;
let t: Tenant;
let root: string;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-poll-'));
  await createRepo(root, 'acme/poll', [{ message: 'first', files: { 'a.txt': '1' } }]);
  h = await startHarness({ gitBaseUrl: `file://${root}/`, gitPollIntervalMs: INTERVAL_MS });
  t = await h.tenant();
});
after(async () => {
  await h.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function create(body: Record<string, unknown>): Promise<string> {
  const res = await h.request('POST', `/v1/environments/${t.envId}/services`, { token: t.token, body });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.service.id;
}

const git = { ...VALID_SERVICE.github, git_repo_full_name: 'acme/poll', git_repo_branch: 'main' };
const commitsDeployed = async (serviceId: string) =>
  (
    await h.deps.store.db
      .selectFrom('deployments')
      .select('git_commit_ref')
      .where('service_id', '=', serviceId)
      .execute()
  ).map((d) => d.git_commit_ref);

test('racing pollers: the head a service is first watched from is not deployed; a new head deploys once', async () => {
  const watched = await create({ ...git, name: 'Polled', auto_deploy: true });
  const manual = await create({ ...git, name: 'Not Polled', auto_deploy: false });
  const race = () => Promise.all([pollGitHeads(h.deps), pollGitHeads(h.deps), pollGitHeads(h.deps)]);
  await race();
  assert.deepEqual(await commitsDeployed(watched), [], 'the first head seen is where watching starts');
  const second = await pushCommit(root, 'acme/poll', { message: 'second', files: { 'a.txt': '2' } });
  await race();
  await race();
  assert.deepEqual(await commitsDeployed(watched), [second], 'deployed once');
  assert.deepEqual(await commitsDeployed(manual), [], 'auto_deploy false: never');
  const audit = await h.deps.store.db
    .selectFrom('audit_logs')
    .select('actor')
    .where('action', '=', 'deployment.create')
    .where('account_id', '=', t.accountId)
    .execute();
  assert.deepEqual(audit, [{ actor: 'Git poller' }]);
});

test('two running pollers deploy a new head within two intervals, and only once', async () => {
  const service = await create({ ...git, name: 'Timed', auto_deploy: true });
  const pollers = [startGitPoller(h.deps), startGitPoller(h.deps)];
  try {
    await pollUntil('the head to be watched', async () =>
      (await h.deps.store.db
        .selectFrom('git_poll_heads')
        .select('head')
        .where('service_id', '=', service)
        .executeTakeFirst())
        ? true
        : undefined,
    );
    const third = await pushCommit(root, 'acme/poll', { message: 'third', files: { 'a.txt': '3' } });
    const pushedAt = Date.now();
    await pollUntil('the new head to be deployed', async () =>
      (await commitsDeployed(service)).includes(third) ? true : undefined,
    );
    const took = Date.now() - pushedAt;
    // Two intervals, and a little for one round's own work on a loaded machine.
    assert.ok(took <= 2 * INTERVAL_MS + 500, `deployed ${took} ms after the push`);
    // Both pollers run further rounds over the same head: still one deployment.
    await pollers[0]?.stop();
    await pollers[1]?.stop();
    await pollGitHeads(h.deps);
    assert.deepEqual(await commitsDeployed(service), [third]);
  } finally {
    for (const poller of pollers) await poller?.stop();
  }
});

test('a commit a push webhook deployed is not deployed again by the poller', async () => {
  await h.gitConnection(t, 'github', { webhook_secret: 'poller-webhook-secret' });
  const service = await create({ ...git, name: 'Hooked', auto_deploy: true });
  await pollGitHeads(h.deps);
  const fourth = await pushCommit(root, 'acme/poll', { message: 'fourth', files: { 'a.txt': '4' } });
  const res = await sendGithub(h, 'poller-webhook-secret', 'push', githubPush('acme/poll', 'main', fourth));
  assert.equal(res.status, 200, res.raw);
  await pollGitHeads(h.deps);
  assert.deepEqual(await commitsDeployed(service), [fourth]);
});
