import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { serverFixture } from '../helpers/server.ts';

/** `berth admin connections ...`: secrets come from files or the environment, and never come back. */
const servers = serverFixture('sim');
let dir: string;
before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-conn-cli-'));
});
after(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const TOKEN = 'ghp_cli-token-never-printed';
const HOOK_SECRET = 'cli-webhook-secret-never-printed';

test('create from a token file and an environment secret, list, refuse a gitlab connection without a token, delete', async () => {
  const server = await servers.serve();
  const admin = async (env: Record<string, string>, ...args: string[]) => {
    const proc = servers.run(['admin', '--url', server.url, '-o', 'json', ...args], {
      BERTH_ADMIN_TOKEN: '',
      ...env,
    });
    const code = await proc.exited;
    return { code, out: proc.stdout(), err: proc.stderr() };
  };
  try {
    const account = await admin({}, 'accounts', 'create', 'acme');
    const accountId = JSON.parse(account.out).account.id as string;
    fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
    const created = await admin(
      { BERTH_GIT_WEBHOOK_SECRET: HOOK_SECRET },
      'connections',
      'create',
      accountId,
      'acme-github',
      '--token-file',
      path.join(dir, 'token'),
    );
    assert.equal(created.code, 0, created.err);
    const connection = JSON.parse(created.out).git_connection;
    assert.equal(connection.credential, 'token');
    assert.equal(connection.kind, 'github');

    const listed = await admin({}, 'connections', 'list', accountId);
    assert.equal(listed.code, 0, listed.err);
    assert.deepEqual(
      JSON.parse(listed.out).git_connections.map((c: { id: string }) => c.id),
      [connection.id],
    );
    for (const text of [created.out, listed.out]) {
      assert.equal(text.includes(TOKEN), false);
      assert.equal(text.includes(HOOK_SECRET), false);
    }

    const refused = await admin(
      { BERTH_GIT_WEBHOOK_SECRET: HOOK_SECRET, BERTH_GIT_TOKEN: '' },
      'connections',
      'create',
      accountId,
      'acme-gitlab',
      '--kind',
      'gitlab',
    );
    assert.equal(refused.code, 5);
    assert.match(refused.err, /token: token is a required field/);

    const deleted = await admin({}, 'connections', 'delete', connection.id);
    assert.equal(deleted.code, 0, deleted.err);
    assert.deepEqual(JSON.parse((await admin({}, 'connections', 'list', accountId)).out).git_connections, []);
  } finally {
    await server.kill('SIGTERM');
  }
});
