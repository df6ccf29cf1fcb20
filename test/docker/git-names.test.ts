import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openStore } from '../../src/store/database.ts';
import { BASE_IMAGE } from '../helpers/docker.ts';
import { createRepo, git } from '../helpers/git.ts';
import { api, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Issue 17 item 7 through the API and the real engine: a git host (git's "dumb" HTTP protocol: plain
 * files, so every fetch is a request in its access log) serves `base/acme/app` under
 * BERTH_GIT_BASE_URL and `secret-repo` beside it. Traversal names are 422s at create and PATCH; a
 * traversal name that reached the database around the API fails its deployment with the reason; in
 * neither case does a single request reach the git host, nor is a directory made to clone into.
 */
const server = serverFixture('docker');
let gitRoot: string;
let tmp: string;
let host: http.Server;
const requests: string[] = [];

before(async () => {
  gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-host-'));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-tmp-'));
  await createRepo(gitRoot, 'secret-repo', [{ message: 'secret', files: { 'secret.txt': 'leak' } }]);
  await createRepo(gitRoot, 'base/acme/app', [
    { message: 'app', files: { Dockerfile: `FROM ${BASE_IMAGE}\nCMD ["sleep", "3600"]\n` } },
  ]);
  for (const repo of ['secret-repo', 'base/acme/app'])
    await git(path.join(gitRoot, repo), 'update-server-info');
  host = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://git.invalid');
    requests.push(url.pathname);
    const file = path.join(gitRoot, path.normalize(decodeURIComponent(url.pathname)));
    if (!file.startsWith(gitRoot) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(fs.readFileSync(file));
  });
  await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
});
after(async () => {
  host?.close();
  for (const dir of [gitRoot, tmp]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const TRAVERSALS = ['../secret-repo', 'acme/../../secret-repo', 'acme/../../secret-repo/.', '-acme/app'];
const cloneDirs = () => fs.readdirSync(tmp).filter((f) => f.startsWith('berth-src-'));

test('a traversal name is a 422 at the API and never reaches the git host, even when stored around the API', async () => {
  const env = {
    BERTH_GIT_BASE_URL: `http://127.0.0.1:${(host.address() as AddressInfo).port}/base/`,
    // Where the server makes its clone directories: this test's own, so it can look into it.
    TMPDIR: tmp,
  };
  let berth = await server.serve(env);
  try {
    const started = await server.firstStart(berth);
    // The restart below brings a new port: URLs are built on the server of the moment.
    const envUrl = () => `${berth.url}/v1/environments/${started.envId}`;
    const service = {
      name: 'Named',
      source: 'github',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.25,
      memory_mb_min: 32,
      git_repo_branch: 'main',
    };
    for (const name of TRAVERSALS) {
      const refused = await api(`${envUrl()}/services`, started.token, 'POST', {
        ...service,
        git_repo_full_name: name,
        deploy_now: true,
      });
      assert.equal(refused.status, 422, `${name}: ${JSON.stringify(refused.body)}`);
      assert.deepEqual(
        refused.body.errors.map((e: { field: string }) => e.field),
        ['git_repo_full_name'],
      );
    }

    // A name inside the base is cloned: the host's log shows fetches when there are any.
    const created = await api(`${envUrl()}/services`, started.token, 'POST', {
      ...service,
      git_repo_full_name: 'acme/app',
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const serviceUrl = () => `${envUrl()}/services/${created.body.data.service.id}`;
    const deploy = async () => {
      const res = await api(`${serviceUrl()}/deploy`, started.token, 'POST', {});
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return deploymentEnd(berth.url, started.token, res.body.data.deployment_id, 120_000);
    };
    const good = await deploy();
    assert.equal(good.state, 'success', good.failure_reason);
    assert.ok(requests.some((p) => p.startsWith('/base/acme/app/')));

    for (const name of TRAVERSALS) {
      const patched = await api(serviceUrl(), started.token, 'PATCH', { git_repo_full_name: name });
      assert.equal(patched.status, 422, `${name}: ${JSON.stringify(patched.body)}`);
    }

    // A name written straight into the database (by an older version, say) is checked again where the
    // clone URL is built.
    await berth.kill('SIGTERM');
    const store = await openStore({
      databaseUrl: server.database.databaseUrl,
      dataDir: server.database.dataDir,
    });
    await store.db
      .updateTable('services')
      .set({ git_repo_full_name: 'acme/../../secret-repo' })
      .where('id', '=', created.body.data.service.id)
      .execute();
    await store.close();
    berth = await server.serve(env);
    const made: string[] = [];
    const watcher = fs.watch(tmp, (_event, name) => {
      if (name?.startsWith('berth-src-')) made.push(name);
    });
    const stored = await deploy().finally(() => watcher.close());
    assert.equal(stored.state, 'failed');
    assert.match(stored.failure_reason, /^git_repo_full_name must have the form org\/repo/);

    assert.deepEqual(
      requests.filter((p) => !p.startsWith('/base/acme/app/')),
      [],
      'nothing outside the base was fetched',
    );
    assert.deepEqual(made, [], 'no directory to clone into was made');
    assert.deepEqual(cloneDirs(), [], 'nor one left behind');
  } finally {
    await berth.kill('SIGTERM');
  }
});
