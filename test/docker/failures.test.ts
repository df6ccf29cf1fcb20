import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import {
  BASE_IMAGE,
  buildImage,
  freePort,
  pushImage,
  type Registry,
  startRegistry,
} from '../helpers/docker.ts';
import { createRepo } from '../helpers/git.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Deployments that cannot succeed end at once and say why: a replica that crashes during the rollout
 * (exit code and last output), and permanent provider errors (no such tag, repository or commit, no
 * Dockerfile, a failing build). A transient one (the registry is down) is retried, and the deployment
 * shows the latest attempt's error while it is.
 */
const server = serverFixture('docker');
let registry: Registry;
let gitRoot: string;
let berth: BerthProcess & { url: string };
let token: string;
let envUrl: string;

// Below the retry schedule (1 s doubling over 8 attempts: two minutes) and the 5 min deploy_timeout,
// with room for a busy machine.
const AT_ONCE_MS = 90_000;

before(async () => {
  registry = await startRegistry();
  const crashing = `${registry.address}/berth-test/crash:v1`;
  await buildImage(
    crashing,
    `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "echo booting; echo 'fatal: DATABASE_URL is not set' >&2; exit 3"]\n`,
  );
  await pushImage(crashing);
  gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-'));
  await createRepo(gitRoot, 'acme/no-dockerfile', [
    { message: 'no Dockerfile', files: { 'README.md': 'nothing to build\n' } },
  ]);
  await createRepo(gitRoot, 'acme/broken-build', [
    {
      message: 'a build that fails',
      files: { Dockerfile: `FROM ${BASE_IMAGE}\nRUN echo compiling && exit 7\n` },
    },
  ]);
  ({ berth, token, envUrl } = await server.start({ BERTH_GIT_BASE_URL: `file://${gitRoot}/` }));
});
after(async () => {
  await registry?.stop();
  if (gitRoot) fs.rmSync(gitRoot, { recursive: true, force: true });
});

const web = { type: 'web', port: 8080, replica_count: 1, cpu_count_min: 0.25, memory_mb_min: 32 };

async function deploy(service: Record<string, unknown>, target: Record<string, string> = {}) {
  const created = await api(`${envUrl}/services`, token, 'POST', { ...web, ...service });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const id = created.body.data.service.id as string;
  const res = await api(`${envUrl}/services/${id}/deploy`, token, 'POST', target);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.deployment_id as string;
}

async function failsAtOnce(deploymentId: string, reason: RegExp) {
  const end = await deploymentEnd(berth.url, token, deploymentId, AT_ONCE_MS);
  assert.equal(end.state, 'failed');
  assert.match(end.failure_reason, reason);
  assert.doesNotMatch(end.failure_reason, /kept failing|retrying/, 'failed on the first attempt');
  return end.failure_reason as string;
}

test('a replica that crashes during the rollout fails the deployment at once, with its exit code and last output', async () => {
  const id = await deploy(
    {
      name: 'Crash Loop',
      source: 'docker_image',
      docker_registry: registry.address,
      docker_image: 'berth-test/crash',
    },
    { docker_image_tag: 'v1' },
  );
  const reason = await failsAtOnce(id, /a replica exited with code 3\. Last output: /);
  assert.match(reason, /booting/);
  assert.match(reason, /fatal: DATABASE_URL is not set/);
});

test('an image tag that does not exist fails at once with the registry’s answer', async () => {
  const id = await deploy(
    {
      name: 'No Tag',
      source: 'docker_image',
      docker_registry: registry.address,
      docker_image: 'berth-test/crash',
    },
    { docker_image_tag: 'v404' },
  );
  await failsAtOnce(id, /could not pull .*berth-test\/crash:v404.*not found/);
});

test('a repository that does not exist, a missing Dockerfile and a failing build fail at once', async () => {
  const git = { source: 'github', git_repo_branch: 'main' };
  await failsAtOnce(
    await deploy({ ...git, name: 'No Repo', git_repo_full_name: 'acme/nowhere' }),
    /git could not check out acme\/nowhere@main/,
  );
  await failsAtOnce(
    await deploy({ ...git, name: 'No Dockerfile', git_repo_full_name: 'acme/no-dockerfile' }),
    /no Dockerfile at Dockerfile/,
  );
  await failsAtOnce(
    await deploy({ ...git, name: 'Bad Build', git_repo_full_name: 'acme/broken-build' }),
    /the image build failed: .*returned a non-zero code: 7/,
  );
});

test('a container the Docker Engine refuses (a memory limit below its minimum) fails at once', async () => {
  const id = await deploy(
    {
      name: 'Tiny Memory',
      source: 'docker_image',
      docker_registry: registry.address,
      docker_image: 'berth-test/crash',
      memory_mb_min: 1,
      memory_mb_max: 1,
    },
    { docker_image_tag: 'v1' },
  );
  await failsAtOnce(id, /^the Docker Engine refused the container: .*memory/i);
});

test('a registry that is down is retried, and the deployment shows the latest attempt’s error meanwhile', async () => {
  const down = `127.0.0.1:${await freePort()}`;
  const id = await deploy({
    name: 'Registry Down',
    source: 'docker_image',
    docker_registry: down,
    docker_image: 'berth-test/crash',
  });
  // Attempt 2's reason shows only until attempt 3 fails (a 2 s backoff later): a busy machine's poll can
  // miss it, so any failed attempt after the first shows that the job was retried.
  const shown = await pollUntil(
    'the deployment to show a retried attempt',
    async () => {
      const d = (await api(`${berth.url}/v1/deployments/${id}`, token)).body.data.deployment;
      const attempt = /^Attempt (\d+) of 8 failed/.exec(d.failure_reason ?? '')?.[1];
      return attempt && Number(attempt) >= 2 ? d : undefined;
    },
    { timeoutMs: AT_ONCE_MS },
  );
  assert.equal(shown.state, 'in_progress');
  assert.match(
    shown.failure_reason,
    /^Attempt \d of 8 failed, retrying: could not pull .*connection refused/,
  );
});
