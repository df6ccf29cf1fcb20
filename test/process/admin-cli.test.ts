import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pollUntil } from '../helpers/poll.ts';
import { api, runBerth } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/** `berth admin ...` drives the running server's admin API, as an operator would. */
const servers = serverFixture('sim');

async function admin(url: string, ...args: string[]) {
  const proc = servers.run(['admin', '--url', url, '-o', 'json', ...args], { BERTH_ADMIN_TOKEN: '' });
  const code = await proc.exited;
  return { code, out: proc.stdout(), err: proc.stderr() };
}

test('accounts, tokens, environments and dependency passwords through berth admin; errors are one clear line', async () => {
  const server = await servers.serve();
  try {
    const account = await admin(server.url, 'accounts', 'create', 'acme', '--plan', 'starter');
    assert.equal(account.code, 0, account.err);
    const accountId = JSON.parse(account.out).account.id as string;
    assert.equal(JSON.parse(account.out).account.plan, 'starter');

    const issued = await admin(server.url, 'tokens', 'issue', accountId);
    assert.equal(issued.code, 0, issued.err);
    const { api_token: token, token_id: tokenId } = JSON.parse(issued.out);

    const created = await admin(
      server.url,
      'environments',
      'create',
      accountId,
      'staging',
      '--cloud',
      'gcp',
      '--region',
      'europe-west1',
    );
    assert.equal(created.code, 0, created.err);
    const envId = JSON.parse(created.out).environment.id as string;
    const live = await pollUntil('the environment to be available', async () => {
      const res = await api(`${server.url}/v1/environments/${envId}`, token);
      return res.body.data.environment.state === 'available' ? res.body.data : undefined;
    });
    assert.equal(live.environment.cloud, 'gcp');
    assert.match(live.ingress_host, /^\d+\.\d+\.\d+\.\d+$/, 'GCP ingress is an address for an A record');

    // A dependency's password, read back by its $passwordArn: in the account's audit log.
    const envUrl = `${server.url}/v1/environments/${envId}`;
    const service = await api(`${envUrl}/services`, token, 'POST', {
      name: 'Database User',
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.25,
      memory_mb_min: 64,
      docker_image: 'acme/db-user',
      ops_json: JSON.stringify({
        dependencies: { rds: { instances: [{ id: 'db', exports: { DB_PASSWORD: '$password' } }] } },
      }),
    });
    assert.equal(service.status, 200, JSON.stringify(service.body));
    const serviceId = service.body.data.service.id as string;
    const deployed = await api(`${envUrl}/services/${serviceId}/deploy`, token, 'POST', {});
    const arn = await pollUntil('the database to be made', async () => {
      const res = await api(`${envUrl}/services/${serviceId}/dependencies`, token);
      return res.body.data.dependencies[0]?.state === 'available'
        ? (res.body.data.dependencies[0].attributes.passwordArn as string)
        : undefined;
    });
    const password = await admin(server.url, 'dependency-password', arn);
    assert.equal(password.code, 0, password.err);
    const read = JSON.parse(password.out);
    assert.equal(read.arn, arn);
    assert.match(read.password, /^[A-Za-z0-9_-]{24}$/);
    const audit = await api(`${server.url}/v1/audit-logs`, token);
    const entry = audit.body.data.audit_logs.find(
      (e: { action: string }) => e.action === 'dependency_password.read',
    );
    assert.equal(entry?.actor, 'Operator');
    assert.equal(entry?.resource_id, serviceId);
    await pollUntil('the deployment to end', async () => {
      const res = await api(`${server.url}/v1/deployments/${deployed.body.data.deployment_id}`, token);
      return res.body.data.deployment.state === 'success' ? true : undefined;
    });

    const updated = await admin(server.url, 'accounts', 'update', accountId, '--plan', 'none');
    assert.equal(updated.code, 0, updated.err);
    assert.equal((await api(`${server.url}/v1/environments`, token)).status, 403);

    const revoked = await admin(server.url, 'tokens', 'revoke', tokenId);
    assert.equal(revoked.code, 0, revoked.err);
    assert.equal((await api(`${server.url}/v1/environments`, token)).status, 401);

    const bad = await admin(
      server.url,
      'accounts',
      'update',
      '00000000-0000-4000-8000-000000000000',
      '--plan',
      'pro',
    );
    assert.equal(bad.code, 4, 'not found, as for the developer commands');
    assert.match(bad.err, /^berth: notfound: Account not found\n$/);
    const invalid = await admin(server.url, 'environments', 'create', accountId, 'x', '--region', 'mars-1');
    assert.equal(invalid.code, 5, invalid.err);
    assert.match(
      invalid.err,
      /^berth: validation: Invalid data\n {2}region: region must be one of the aws regions: /,
    );

    const wrongToken = runBerth(['admin', '--url', server.url, '--token', 'nope', 'accounts', 'list'], {});
    assert.equal(await wrongToken.exited, 3);
    assert.match(wrongToken.stderr(), /unauthorized/);
    assert.match(
      wrongToken.stderr(),
      /\n {2}the admin token was refused: pass --token, or set BERTH_ADMIN_TOKEN/,
    );
  } finally {
    await server.kill('SIGTERM');
  }
});

test('users and memberships through berth admin: a member token does what the role allows', async () => {
  const server = await servers.serve();
  try {
    const run = async (...args: string[]) => {
      const res = await admin(server.url, ...args);
      assert.equal(res.code, 0, res.err);
      return JSON.parse(res.out);
    };
    const accountId = (await run('accounts', 'create', 'people', '--plan', 'pro')).account.id as string;
    const user = (await run('users', 'create', 'grace@example.com', 'Grace Hopper')).user;
    assert.deepEqual([user.email, user.display_name], ['grace@example.com', 'Grace Hopper']);
    assert.ok((await run('users', 'list')).users.some((u: { id: string }) => u.id === user.id));
    const member = (await run('users', 'add', accountId, user.id, '--role', 'viewer')).member;
    assert.deepEqual(
      [member.email, member.role, member.environment_ids],
      ['grace@example.com', 'viewer', null],
    );
    const members = (await run('users', 'members', accountId)).members;
    assert.deepEqual(
      members.map((m: { email: string }) => m.email),
      ['grace@example.com'],
    );
    const { api_token: token } = await run('users', 'token', accountId, user.id);
    assert.equal((await api(`${server.url}/v1/environments`, token)).status, 200);
    const refused = await api(`${server.url}/v1/tokens`, token, 'POST', { name: 'x', role: 'viewer' });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.message, 'This call needs the admin role; this token acts as viewer');
    await run('users', 'remove', accountId, user.id);
    assert.equal((await api(`${server.url}/v1/environments`, token)).status, 401);

    const missingRole = await admin(server.url, 'users', 'add', accountId, user.id);
    assert.equal(missingRole.code, 2);
    assert.match(missingRole.err, /--role/);
  } finally {
    await server.kill('SIGTERM');
  }
});

test('berth admin says clearly when no server answers', async () => {
  const res = await admin('http://127.0.0.1:9', 'accounts', 'list');
  assert.equal(res.code, 1, 'unexpected (no server), as for the developer commands');
  assert.match(res.err, /Cannot reach Berth at http:\/\/127\.0\.0\.1:9.*Is berth serve running\?/);
});

test('an admin token pasted with a line break is a usage error that never shows it', async () => {
  const proc = servers.run(['admin', '--url', 'http://127.0.0.1:9', 'accounts', 'list'], {
    BERTH_ADMIN_TOKEN: 'first-line-of-secret\nsecond-line',
  });
  const code = await proc.exited;
  assert.equal(code, 2, proc.stderr());
  assert.match(proc.stderr(), /^berth: the admin token \(--token, BERTH_ADMIN_TOKEN .*\) holds a line break/);
  assert.ok(!proc.stderr().includes('first-line-of-secret'), proc.stderr());
});
