import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { createRepo, pushCommit } from '../helpers/git.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * The sim provider and real repositories (issue 25): with BERTH_GIT_BASE_URL set, a `{}` deploy of a git
 * service records the branch's real head where the repository answers; a repository it cannot read, or
 * no BERTH_GIT_BASE_URL at all, gets a simulated sha.
 */
let h: Harness;
let t: Tenant;
let root: string;
let head: string;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-sim-head-'));
  await createRepo(root, 'acme/real', [{ message: 'first', files: { 'a.txt': '1' } }]);
  head = await pushCommit(root, 'acme/real', { message: 'second', files: { 'a.txt': '2' } });
  h = await startHarness({ providerEnv: { BERTH_SIM_STEP_MS: '20', BERTH_GIT_BASE_URL: `file://${root}/` } });
  await h.startWorker();
  t = await h.tenant();
});
after(async () => {
  await h.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function deployHead(repo: string) {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.github, git_repo_full_name: repo, git_repo_branch: 'main' },
  });
  assert.equal(created.status, 200, created.raw);
  const url = `/v1/environments/${t.envId}/services/${created.body.data.service.id}/deploy`;
  const res = await h.request('POST', url, { token: t.token, body: {} });
  assert.equal(res.status, 200, res.raw);
  return pollUntil('the deployment to finish', async () => {
    const d = await h.request('GET', `/v1/deployments/${res.body.data.deployment_id}`, { token: t.token });
    const deployment = d.body.data.deployment;
    return deployment.state === 'success' ? deployment : undefined;
  });
}

test('deploy {} records the head of a repository the sim can read', async () => {
  const deployment = await deployHead('acme/real');
  assert.equal(deployment.git_commit_ref, head);
  // The sim clones nothing: it names no author or message it could not know.
  assert.equal(deployment.git_commit_author, '');
  const lines = await h.request('GET', `/v1/deployments/${deployment.id}/logs`, { token: t.token });
  assert.ok(
    JSON.stringify(lines.body).includes(`Commit ${head} (the head of main, read from the repository)`),
    lines.raw,
  );
});

test('a repository it cannot read gets a simulated sha', async () => {
  const deployment = await deployHead('acme/missing');
  assert.match(deployment.git_commit_ref, /^[0-9a-f]{40}$/);
  assert.notEqual(deployment.git_commit_ref, head);
  assert.equal(deployment.git_commit_author, 'Sim Developer <developer@sim.berth.test>');
});
