import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { api } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/** A first start that cannot listen creates nothing, says why in one line, and leaves the next start whole. */
const servers = serverFixture('sim');
const NO_ADMIN_TOKEN = { BERTH_ADMIN_TOKEN: '' };

async function holdPort(): Promise<{ port: number; release(): Promise<void> }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return { port, release: () => new Promise((resolve) => server.close(() => resolve())) };
}

test('a port in use: one line naming BERTH_PORT, exit 2, and no account, token or admin token created', async () => {
  const held = await holdPort();
  try {
    const refused = servers.run(['serve'], { ...NO_ADMIN_TOKEN, BERTH_PORT: String(held.port) });
    assert.equal(await refused.exited, 2, refused.stderr());
    assert.equal(refused.stderr(), `berth: port ${held.port} is in use: set BERTH_PORT\n`);
    assert.equal(refused.stdout(), '');
    assert.equal(
      fs.existsSync(path.join(servers.database.dataDir, 'admin-token')),
      false,
      'no admin token saved',
    );
  } finally {
    await held.release();
  }

  // Nothing was created: the next start is the first start, and its token works.
  const server = await servers.serve(NO_ADMIN_TOKEN);
  try {
    const token = (await server.waitForOutput(/API token:\s+([0-9a-f-]{36})/))[1] as string;
    const adminToken = (
      await server.waitForOutput(/Admin token \(for \/admin\/v1 and berth admin\): ([0-9a-f-]{36})/)
    )[1] as string;
    const accountId = (await server.waitForOutput(/account:\s+([0-9a-f-]{36})/))[1] as string;
    await server.waitForOutput(/owner:\s+owner@localhost\n/);
    const envs = await api(`${server.url}/v1/environments`, token);
    assert.equal(envs.status, 200);
    assert.equal(envs.body.data.environments.length, 1);
    // The printed owner is the account's one member, its owner (docs/access.md).
    const members = await api(`${server.url}/admin/v1/accounts/${accountId}/members`, adminToken);
    assert.deepEqual(
      members.body.data.members.map((m: { email: string; role: string }) => [m.email, m.role]),
      [['owner@localhost', 'owner']],
    );
    // The printed one-time link signs the owner in and sets their password; then the password works.
    const link = (await server.waitForOutput(/sign in:\s+(\S+)/))[1] as string;
    assert.ok(link.startsWith(`${server.url}/#/sign-in-link?token=`), link);
    const linkToken = new URL(link).hash.split('token=')[1];
    const password = 'a password for the owner';
    const used = await fetch(`${server.url}/auth/sign-in-link`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: linkToken, password }),
    });
    assert.equal(used.status, 200, await used.text());
    const signedIn = await fetch(`${server.url}/auth/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'owner@localhost', password }),
    });
    assert.equal(signedIn.status, 200, await signedIn.text());
    const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const mine = await fetch(`${server.url}/v1/environments`, { headers: { cookie } });
    assert.equal(mine.status, 200);
  } finally {
    assert.equal(await server.kill('SIGTERM'), 0);
  }
});

test('a host that is not this machine: one line naming BERTH_HOST', async () => {
  const refused = servers.run(['serve'], { BERTH_HOST: '192.0.2.1', BERTH_PORT: '0' });
  assert.equal(await refused.exited, 2, refused.stderr());
  assert.equal(refused.stderr(), 'berth: 192.0.2.1 is not an address of this machine: set BERTH_HOST\n');
});
