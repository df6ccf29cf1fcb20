import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import {
  BASE_IMAGE,
  buildBaseImage,
  docker,
  freePort,
  removeEnvironment,
  requireDocker,
  viaIngress,
} from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, deploymentEnd, firstStartOf, startBerth } from '../helpers/process.ts';

/**
 * A github service built from a local bare repository (BERTH_GIT_BASE_URL=file://...), its Dockerfile
 * in a sub-directory given as build_context and its ops.json read from the repository; two commits
 * deployed in turn change what the service answers.
 */
const run = promisify(execFile);
let db: TestDatabase;
let envId: string | undefined;
let gitRoot: string;
let ingressPort: number;
const commits: string[] = [];

async function git(cwd: string, ...args: string[]) {
  const { stdout } = await run(
    'git',
    ['-c', 'user.name=Berth Test', '-c', 'user.email=test@berth.invalid', ...args],
    { cwd },
  );
  return stdout.trim();
}

before(async () => {
  await requireDocker();
  db = await createTestDatabase();
  ingressPort = await freePort();
  await buildBaseImage();
  gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-'));
  const bare = path.join(gitRoot, 'acme', 'site');
  const work = path.join(gitRoot, 'work');
  fs.mkdirSync(bare, { recursive: true });
  await git(bare, 'init', '--quiet', '--bare', '--initial-branch=main');
  await git(gitRoot, 'clone', '--quiet', bare, work);
  fs.mkdirSync(path.join(work, 'app'));
  fs.writeFileSync(
    path.join(work, 'app', 'Dockerfile'),
    `FROM ${BASE_IMAGE}\nCOPY index.html /www/index.html\nCMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n`,
  );
  fs.writeFileSync(
    path.join(work, 'ops.json'),
    JSON.stringify({ health_check: { type: 'http', path: '/index.html' } }),
  );
  for (const release of ['release one', 'release two']) {
    fs.writeFileSync(path.join(work, 'app', 'index.html'), `${release}\n`);
    await git(work, 'add', '-A');
    await git(work, 'commit', '--quiet', '-m', release);
    commits.push(await git(work, 'rev-parse', 'HEAD'));
  }
  await git(work, 'push', '--quiet', 'origin', 'main');
});
after(async () => {
  if (envId) await removeEnvironment(envId);
  fs.rmSync(gitRoot, { recursive: true, force: true });
  await db?.drop();
});

test('deploys a given commit built from build_context; a second commit changes the answer; delete removes the images', async () => {
  const berth = await startBerth({
    BERTH_DATA_DIR: db.dataDir,
    BERTH_DATABASE_URL: db.databaseUrl ?? '',
    BERTH_PROVIDER: 'docker',
    BERTH_INGRESS_HOST: 'localhost',
    BERTH_INGRESS_PORT: String(ingressPort),
    BERTH_GIT_BASE_URL: `file://${gitRoot}/`,
  });
  try {
    const started = await firstStartOf(berth);
    const token = started.token;
    envId = started.envId;
    const created = await api(`${berth.url}/v1/environments/${envId}/services`, token, 'POST', {
      name: 'Site',
      source: 'github',
      type: 'web',
      port: 8080,
      replica_count: 1,
      cpu_count_min: 0.25,
      memory_mb_min: 64,
      git_repo_full_name: 'acme/site',
      git_repo_branch: 'main',
      build_context: 'app',
      ops_json_path: 'ops.json',
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const service = created.body.data.service;
    const serviceUrl = `${berth.url}/v1/environments/${envId}/services/${service.id}`;

    const deployCommit = async (commit: string) => {
      const res = await api(`${serviceUrl}/deploy`, token, 'POST', { commit_id: commit });
      return deploymentEnd(berth.url, token, res.body.data.deployment_id, 120_000);
    };

    const first = await deployCommit(commits[0] as string);
    assert.equal(first.state, 'success', first.failure_reason);
    assert.equal(first.git_commit_ref, commits[0]);
    assert.equal((await viaIngress(ingressPort, `${service.subdomain}.localhost`)).body, 'release one\n');

    const second = await deployCommit(commits[1] as string);
    assert.equal(second.state, 'success', second.failure_reason);
    assert.equal((await viaIngress(ingressPort, `${service.subdomain}.localhost`)).body, 'release two\n');

    const missing = await deployCommit('0000000000000000000000000000000000000000');
    assert.equal(missing.state, 'failed');
    assert.match(missing.failure_reason, /git could not check out acme\/site@0{40}/);
    assert.equal((await viaIngress(ingressPort, `${service.subdomain}.localhost`)).body, 'release two\n');

    const built = await docker.listImages({ filters: { label: [`berth.service=${service.id}`] } });
    assert.equal(built.length, 2, 'one image per successful build');

    assert.equal((await api(serviceUrl, token, 'DELETE')).status, 202);
    await pollUntil(
      'the service to be deleted',
      async () => ((await api(serviceUrl, token)).body.data.state === 'deleted' ? true : undefined),
      { timeoutMs: 60_000 },
    );
    assert.deepEqual(await docker.listImages({ filters: { label: [`berth.service=${service.id}`] } }), []);
  } finally {
    await berth.kill('SIGTERM');
  }
});
