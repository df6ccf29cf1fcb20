import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { BASE_IMAGE, docker, viaIngress } from '../helpers/docker.ts';
import { git } from '../helpers/git.ts';
import { api, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * A repository whose symbolic links point at a directory and files of the host: build_context,
 * dockerfile_path and ops_json_path through them are refused, with a reason that names neither the
 * host path nor its content, and reads the same whether the host file exists or not. A link that
 * stays inside the repository still builds.
 */
const server = serverFixture('docker', () => ({
  BERTH_INGRESS_HOST: 'localhost',
  BERTH_GIT_BASE_URL: `file://${gitRoot}/`,
}));
let gitRoot: string;
let hostDir: string;
const HOST_SECRET = 'host-secret-7f3a';

before(async () => {
  hostDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-host-'));
  fs.writeFileSync(path.join(hostDir, 'secret.txt'), `${HOST_SECRET}\n`);
  fs.writeFileSync(path.join(hostDir, 'ops.json'), JSON.stringify({ deploy_timeout: 2 }));
  fs.writeFileSync(
    path.join(hostDir, 'Dockerfile'),
    `FROM ${BASE_IMAGE}\nCOPY secret.txt /www/index.html\nCMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n`,
  );
  gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-'));
  const bare = path.join(gitRoot, 'acme', 'links');
  const work = path.join(gitRoot, 'work');
  fs.mkdirSync(bare, { recursive: true });
  await git(bare, 'init', '--quiet', '--bare', '--initial-branch=main');
  await git(gitRoot, 'clone', '--quiet', bare, work);
  fs.mkdirSync(path.join(work, 'app'));
  fs.writeFileSync(
    path.join(work, 'app', 'Dockerfile'),
    `FROM ${BASE_IMAGE}\nCOPY index.html /www/index.html\nCMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n`,
  );
  fs.writeFileSync(path.join(work, 'app', 'index.html'), 'inside\n');
  const link = (target: string, name: string) => fs.symlinkSync(target, path.join(work, name));
  link(hostDir, 'ctx');
  link(path.relative(work, hostDir), 'ctx-relative');
  link(path.join(hostDir, 'Dockerfile'), 'Dockerfile.host');
  link(path.join(hostDir, 'ops.json'), 'ops-host.json');
  link(path.join(hostDir, 'secret.txt'), 'ops-text.json');
  link('/nonexistent/berth/ops.json', 'ops-missing.json');
  link('app', 'inner');
  await git(work, 'add', '-A');
  await git(work, 'commit', '--quiet', '-m', 'links');
  await git(work, 'push', '--quiet', 'origin', 'main');
});
after(() => {
  fs.rmSync(gitRoot, { recursive: true, force: true });
  fs.rmSync(hostDir, { recursive: true, force: true });
});

test('symbolic links out of the repository are refused for build_context, dockerfile_path and ops_json_path', async () => {
  const { berth, token, envId } = await server.start();
  const { ingressPort } = server;
  try {
    let n = 0;
    const deploy = async (fields: Record<string, string>) => {
      n += 1;
      const created = await api(`${berth.url}/v1/environments/${envId}/services`, token, 'POST', {
        name: `Links ${'abcdefgh'[n]}`,
        source: 'github',
        type: 'web',
        port: 8080,
        replica_count: 1,
        cpu_count_min: 0.25,
        memory_mb_min: 64,
        git_repo_full_name: 'acme/links',
        git_repo_branch: 'main',
        ...fields,
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const service = created.body.data.service;
      const url = `${berth.url}/v1/environments/${envId}/services/${service.id}/deploy`;
      const res = await api(url, token, 'POST', {});
      return { service, end: deploymentEnd(berth.url, token, res.body.data.deployment_id, 120_000) };
    };

    const refusals: [Record<string, string>, string][] = [
      [{ build_context: 'ctx' }, 'build_context ctx is outside the repository'],
      [{ build_context: 'ctx-relative' }, 'build_context ctx-relative is outside the repository'],
      [{ dockerfile_path: 'Dockerfile.host' }, 'dockerfile_path Dockerfile.host is outside the repository'],
      [
        { build_context: 'app', ops_json_path: 'ops-host.json' },
        'ops_json_path ops-host.json is outside the repository',
      ],
      // A host file that is not JSON and one that does not exist read the same: nothing leaks.
      [
        { build_context: 'app', ops_json_path: 'ops-text.json' },
        'ops_json_path ops-text.json is outside the repository',
      ],
      [
        { build_context: 'app', ops_json_path: 'ops-missing.json' },
        'ops_json_path ops-missing.json is outside the repository',
      ],
    ];
    const pending = await Promise.all(refusals.map(([fields]) => deploy(fields)));
    const inner = await deploy({ build_context: 'inner' });
    for (const [i, { service, end }] of pending.entries()) {
      const deployment = await end;
      const [fields, reason] = refusals[i] as [Record<string, string>, string];
      assert.equal(deployment.state, 'failed', JSON.stringify(fields));
      assert.equal(deployment.failure_reason, reason);
      assert.ok(
        !deployment.failure_reason.includes(hostDir) && !deployment.failure_reason.includes(HOST_SECRET),
      );
      assert.deepEqual(await docker.listImages({ filters: { label: [`berth.service=${service.id}`] } }), []);
    }

    const built = await inner.end;
    assert.equal(built.state, 'success', built.failure_reason);
    assert.equal((await viaIngress(ingressPort, `${inner.service.subdomain}.localhost`)).body, 'inside\n');
  } finally {
    await berth.kill('SIGTERM');
  }
});
