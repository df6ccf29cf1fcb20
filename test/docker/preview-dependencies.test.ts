import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { buildDependencyImages } from '../helpers/dependency-images.ts';
import { BASE_IMAGE, docker } from '../helpers/docker.ts';
import { createRepo, git, pushCommit } from '../helpers/git.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, dependenciesOf, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Issue 11 on the docker provider, for git services and their previews: the ops.json in the repository
 * declares a redis for every service and one `preview_only`; the service built from the repository
 * counts its start in the redis it was given. The parent gets one redis of its own, the pull request's
 * preview two of its own (never the parent's: each count is 1), and deleting the preview deletes its
 * containers and volumes while the parent's stay.
 */
const server = serverFixture('docker');
let berth: BerthProcess & { url: string };
let token: string;
let envUrl: string;
let envId: string;
let gitRoot: string;
let commit: string;

/** The repository's ops.json, its cache of instance class `cacheClass`. */
const opsWith = (cacheClass: string) => ({
  health_check: { type: 'http', path: '/index.html' },
  dependencies: {
    elasticache: {
      clusters: [
        { id: 'cache', prefix: 'cache', instance_type: cacheClass, exports: { CACHE_HOST: '$address' } },
        { id: 'seed', prefix: 'seed', preview_only: true, exports: { SEED_HOST: '$address' } },
      ],
    },
  },
});

/** Counts this start in its redis (QUIT makes redis close, so nc ends), then serves what redis said. */
const START = `mkdir -p /www
printf 'INCR starts\\r\\nQUIT\\r\\n' | nc "$CACHE_HOST" 6379 > /www/index.html
exec httpd -f -p 8080 -h /www
`;

before(
  async () => {
    await buildDependencyImages();
    gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-'));
    [commit = ''] = await createRepo(gitRoot, 'acme/shop', [
      {
        message: 'a shop with a cache',
        files: {
          'app/Dockerfile': `FROM ${BASE_IMAGE}\nCOPY start.sh /start.sh\nCMD ["sh", "/start.sh"]\n`,
          'app/start.sh': START,
          'deploy/ops.json': JSON.stringify(opsWith('cache.t4g.micro')),
        },
      },
    ]);
    await git(path.join(gitRoot, 'acme/shop'), 'branch', 'feature/cart', 'main');
    ({ berth, token, envId, envUrl } = await server.start({ BERTH_GIT_BASE_URL: `file://${gitRoot}/` }));
  },
  { timeout: 1_800_000 },
);
after(() => {
  if (gitRoot) fs.rmSync(gitRoot, { recursive: true, force: true });
});

/** What a redis on the environment's network holds under `starts` (redis-cli of the postgres image). */
async function startsIn(address: string): Promise<string> {
  const container = await docker.createContainer({
    Image: 'berth-deps/postgres:latest',
    Cmd: ['redis-cli', '-h', address, 'GET', 'starts'],
    Labels: { 'berth.environment': envId },
    HostConfig: { NetworkMode: `berth-env-${envId}` },
  });
  try {
    await container.start();
    await container.wait();
    return (await container.logs({ stdout: true, stderr: true })).toString('utf8').replace(/[^ -~]/g, '');
  } finally {
    await container.remove({ force: true });
  }
}

const ofService = (serviceId: string) => ({
  all: true,
  filters: { label: [`berth.dependency-of=${serviceId}`] },
});

test("a preview gets its own real resources from the repository's ops.json; deleting it deletes them", async () => {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Shop',
    source: 'github',
    type: 'web',
    port: 8080,
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 64,
    git_repo_full_name: 'acme/shop',
    git_repo_branch: 'main',
    build_context: 'app',
    ops_json_path: 'deploy/ops.json',
    enable_previews: true,
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const parent = created.body.data.service.id as string;
  const deployed = await api(`${envUrl}/services/${parent}/deploy`, token, 'POST', {});
  const first = await deploymentEnd(berth.url, token, deployed.body.data.deployment_id, 600_000);
  assert.equal(first.state, 'success', first.failure_reason);
  const parentDeps = await dependenciesOf(envUrl, token, parent);
  assert.deepEqual(
    parentDeps.map((d) => `${d.id} ${d.state}`),
    ['cache available'],
  );
  const parentCache = parentDeps[0]?.attributes.address ?? '';
  assert.match(parentCache, /^cache-[0-9a-f]{8}$/);

  const opened = await api(`${envUrl}/services/${parent}/deploy`, token, 'POST', {
    preview: true,
    commit_id: commit,
    branch: 'feature/cart',
    pr_number: 3,
  });
  assert.equal(opened.status, 200, JSON.stringify(opened.body));
  const preview = opened.body.data.service_id as string;
  const previewService = await api(`${envUrl}/services/${preview}`, token);
  const previewDeployment = previewService.body.data.service.latest_deployment.id as string;
  const ran = await deploymentEnd(berth.url, token, previewDeployment, 600_000);
  assert.equal(ran.state, 'success', ran.failure_reason);
  const previewDeps = await dependenciesOf(envUrl, token, preview);
  assert.deepEqual(previewDeps.map((d) => `${d.id} ${d.state}`).sort(), [
    'cache available',
    'seed available',
  ]);
  const previewCache = previewDeps.find((d) => d.id === 'cache')?.attributes.address ?? '';
  assert.match(previewCache, /^cache-[0-9a-f]{8}$/);
  assert.notEqual(previewCache, parentCache, "the preview's cache is its own");

  // Each service counted its one start in its own redis: a shared one would say 2.
  assert.equal(await startsIn(parentCache), '1');
  assert.equal(await startsIn(previewCache), '1');

  assert.equal((await api(`${envUrl}/services/${preview}`, token, 'DELETE')).status, 202);
  await pollUntil(
    'the preview to be deleted',
    async () =>
      (await api(`${envUrl}/services/${preview}`, token)).body.data.state === 'deleted' ? true : undefined,
    { timeoutMs: 120_000 },
  );
  assert.deepEqual(await docker.listContainers(ofService(preview)), []);
  assert.deepEqual((await docker.listVolumes({ filters: ofService(preview).filters })).Volumes, []);
  assert.equal((await docker.listContainers(ofService(parent))).length, 1, "the parent's cache stays");
  assert.equal(await startsIn(parentCache), '1');

  // The cache is capped at its instance class's memory; a commit that changes the class updates it in
  // place at the next deployment: the same container with its data, a new cap.
  const before = await docker.getContainer(`berth-dep-${parentCache}`).inspect();
  assert.equal(before.HostConfig.Memory, 512 * MIB);
  const next = await pushCommit(gitRoot, 'acme/shop', {
    message: 'a bigger cache',
    files: { 'deploy/ops.json': JSON.stringify(opsWith('cache.t4g.small')) },
  });
  const again = await api(`${envUrl}/services/${parent}/deploy`, token, 'POST', {});
  const second = await deploymentEnd(berth.url, token, again.body.data.deployment_id, 600_000);
  assert.equal(second.state, 'success', second.failure_reason);
  assert.equal(second.git_commit_ref, next);
  const after = await docker.getContainer(`berth-dep-${parentCache}`).inspect();
  assert.equal(after.Id, before.Id);
  assert.equal(after.HostConfig.Memory, Math.round(1.37 * 1024 * MIB));
  assert.equal(await startsIn(parentCache), '2', 'the second start counted on the same data');
});

const MIB = 1024 ** 2;
