import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { BASE_IMAGE, docker, viaIngress } from '../helpers/docker.ts';
import { createRepo, GIT_AUTHOR } from '../helpers/git.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * A github service built from a local bare repository (BERTH_GIT_BASE_URL=file://...), its Dockerfile
 * in a sub-directory given as build_context and its ops.json read from the repository; two commits
 * deployed in turn change what the service answers.
 */
const server = serverFixture('docker', () => ({
  BERTH_INGRESS_HOST: 'localhost',
  BERTH_GIT_BASE_URL: `file://${gitRoot}/`,
}));
let gitRoot: string;
let commits: string[] = [];

before(async () => {
  gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-'));
  const base = {
    'app/Dockerfile': `FROM ${BASE_IMAGE}\nCOPY index.html /www/index.html\nCMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n`,
    'ops.json': JSON.stringify({ health_check: { type: 'http', path: '/index.html' } }),
  };
  commits = await createRepo(gitRoot, 'acme/site', [
    { message: 'release one', files: { ...base, 'app/index.html': 'release one\n' } },
    { message: 'release two', files: { 'app/index.html': 'release two\n' } },
  ]);
});
after(() => fs.rmSync(gitRoot, { recursive: true, force: true }));

test('deploys a given commit built from build_context; a second commit changes the answer; delete removes the images', async () => {
  const { berth, token, envId } = await server.start();
  const { ingressPort } = server;
  try {
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

    // `{}` deploys the branch head: the deployment records which commit that was, by whom, and why.
    const headRes = await api(`${serviceUrl}/deploy`, token, 'POST', {});
    const head = await deploymentEnd(berth.url, token, headRes.body.data.deployment_id, 120_000);
    assert.equal(head.state, 'success', head.failure_reason);
    assert.equal(head.git_commit_ref, commits[1]);
    assert.equal(head.git_commit_author, GIT_AUTHOR);
    assert.equal(head.git_commit_message, 'release two');
    assert.match(head.docker_image_digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal((await viaIngress(ingressPort, `${service.subdomain}.localhost`)).body, 'release two\n');

    const missing = await deployCommit('0000000000000000000000000000000000000000');
    assert.equal(missing.state, 'failed');
    assert.equal(
      missing.failure_reason,
      `commit ${'0'.repeat(40)} does not exist in acme/site (looked on branch main)`,
    );
    assert.equal((await viaIngress(ingressPort, `${service.subdomain}.localhost`)).body, 'release two\n');

    const built = await docker.listImages({ filters: { label: [`berth.service=${service.id}`] } });
    assert.equal(built.length, 3, 'one image per successful build');

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
