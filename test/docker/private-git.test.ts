import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TerminalError } from '../../src/jobs/errors.ts';
import { checkout } from '../../src/providers/engine/git-source.ts';
import { BASE_IMAGE, viaIngress } from '../helpers/docker.ts';
import { createRepo, GIT_AUTHOR } from '../helpers/git.ts';
import { type GitServer, startGitServer } from '../helpers/git-server.ts';
import { api, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Private repositories on a real git server (git http-backend behind basic auth, on loopback): cloned
 * with the connection's credential, refused with a clear reason without it, and the credential never
 * shows in an error, the checkout's git config, the deployment's log or its failure reason.
 */
const TOKEN = 'glpat-private-token-never-shown';
const APP_ID = '424242';
const INSTALLATION = '777';
const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
const PRIVATE_KEY = keys.privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;

let root: string;
let server: GitServer;
let commits: string[];

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-private-'));
  commits = await createRepo(root, 'acme/private', [
    {
      message: 'private release',
      files: {
        Dockerfile: `FROM ${BASE_IMAGE}\nCOPY index.html /www/index.html\nCMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n`,
        'index.html': 'private one\n',
      },
    },
  ]);
  server = await startGitServer({
    root,
    credentials: [`oauth2:${TOKEN}`],
    app: {
      id: APP_ID,
      installationId: INSTALLATION,
      publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }) as string,
    },
  });
});
after(async () => {
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('checkout against the git server', () => {
  const clone = (access?: { username: string; password: string }) =>
    checkout({
      baseUrl: server.url,
      repo: 'acme/private',
      branch: 'main',
      commit: '',
      access: access && { baseUrl: server.url, ...access },
    });

  test('with the token: cloned at the head, and no credential is left in the checkout', async () => {
    const source = await clone({ username: 'oauth2', password: TOKEN });
    try {
      assert.equal(source.commit, commits[0]);
      assert.equal(source.author, GIT_AUTHOR);
      assert.equal(fs.readFileSync(path.join(source.dir, 'index.html'), 'utf8'), 'private one\n');
      assert.equal(fs.readFileSync(path.join(source.dir, '.git', 'config'), 'utf8').includes(TOKEN), false);
    } finally {
      source.remove();
    }
  });

  test('without a credential, or with a wrong one: a terminal failure that says what to fix', async () => {
    await assert.rejects(clone(), (error: Error) => {
      assert.ok(error instanceof TerminalError, 'not retried');
      assert.match(
        error.message,
        /^git could not read acme\/private: the host asks for a credential; give the service an installation_id/,
      );
      return true;
    });
    await assert.rejects(clone({ username: 'oauth2', password: 'wrong-token' }), (error: Error) => {
      assert.ok(error instanceof TerminalError);
      assert.match(
        error.message,
        /^git could not read acme\/private with the service's connection: the host refused its credential/,
      );
      assert.equal(error.message.includes('wrong-token'), false);
      return true;
    });
  });

  test('an explicit commit that does not exist fails at once, naming it', async () => {
    const missing = 'deadbeef'.repeat(5);
    await assert.rejects(
      checkout({
        baseUrl: server.url,
        repo: 'acme/private',
        branch: 'main',
        commit: missing,
        access: { baseUrl: server.url, username: 'oauth2', password: TOKEN },
      }),
      (error: Error) => {
        assert.ok(error instanceof TerminalError);
        assert.equal(
          error.message,
          `commit ${missing} does not exist in acme/private (looked on branch main)`,
        );
        return true;
      },
    );
  });
});

describe('through Berth with the docker provider', () => {
  const servers = serverFixture('docker');

  test('a GitHub App connection mints an installation token and deploys the private repository; without a connection the deployment fails saying why', async () => {
    const adminToken = 'a0a0a0a0-1111-4222-8333-944444444444';
    const berth = await servers.serve({
      BERTH_ADMIN_TOKEN: adminToken,
      BERTH_INGRESS_HOST: 'localhost',
      BERTH_GIT_BASE_URL: `${server.url}/`,
    });
    try {
      const started = await servers.firstStart(berth);
      const { envId } = started;
      const accounts = await api(`${berth.url}/admin/v1/accounts`, adminToken);
      const accountId = accounts.body.data.accounts[0].id;
      const connection = await api(
        `${berth.url}/admin/v1/accounts/${accountId}/git-connections`,
        adminToken,
        'POST',
        {
          kind: 'github',
          name: 'acme app',
          base_url: server.url,
          github_app_id: APP_ID,
          github_installation_id: INSTALLATION,
          private_key: PRIVATE_KEY,
          webhook_secret: 'private-git-webhook-secret',
        },
      );
      assert.equal(connection.status, 200, JSON.stringify(connection.body));
      const service = (installation_id?: string) => ({
        name: installation_id ? 'Private' : 'Anonymous',
        source: 'github',
        type: 'web',
        port: 8080,
        replica_count: 1,
        cpu_count_min: 0.25,
        memory_mb_min: 64,
        git_repo_full_name: 'acme/private',
        git_repo_branch: 'main',
        ...(installation_id && { installation_id }),
      });
      const services = `${berth.url}/v1/environments/${envId}/services`;
      const deployOf = async (body: object) => {
        const created = await api(services, started.token, 'POST', body);
        assert.equal(created.status, 200, JSON.stringify(created.body));
        const id = created.body.data.service.id;
        const res = await api(`${services}/${id}/deploy`, started.token, 'POST', {});
        const end = await deploymentEnd(berth.url, started.token, res.body.data.deployment_id, 120_000);
        const log = await api(`${berth.url}/v1/deployments/${end.id}/logs`, started.token);
        return { service: created.body.data.service, end, log: JSON.stringify(log.body) };
      };

      const ok = await deployOf(service(connection.body.data.git_connection.id));
      assert.equal(ok.end.state, 'success', ok.end.failure_reason);
      assert.equal(ok.end.git_commit_ref, commits[0]);
      assert.equal(server.minted.length, 1, 'one installation token minted');
      assert.equal(
        (await viaIngress(servers.ingressPort, `${ok.service.subdomain}.localhost`)).body,
        'private one\n',
      );
      assert.equal(ok.log.includes(server.minted[0] as string), false, 'the token is not in the log');

      const refused = await deployOf(service());
      assert.equal(refused.end.state, 'failed');
      assert.match(
        refused.end.failure_reason,
        /the host asks for a credential; give the service an installation_id/,
      );
      assert.equal(`${berth.stdout()}${berth.stderr()}`.includes(server.minted[0] as string), false);
    } finally {
      await berth.kill('SIGTERM');
    }
  });
});
