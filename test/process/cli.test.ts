import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { REPO } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * The `berth` bin as installed: on the machine's own, older Node (it runs itself again on the package's
 * Node 24), with output that pipes into jq as it is.
 */
const OLD_NODE = process.env.BERTH_TEST_OLD_NODE ?? '/usr/bin/node';
const VERSION = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8')).version as string;

const servers = serverFixture('sim');

async function berth(args: string[], env: Record<string, string> = {}) {
  const proc = servers.run(args, { BERTH_ADMIN_TOKEN: '', ...env }, { node: OLD_NODE });
  const code = await proc.exited;
  return { code, out: proc.stdout(), err: proc.stderr() };
}

test('the machine Node is older than 24, so these tests exercise the re-run', () => {
  const version = execFileSync(OLD_NODE, ['--version'], { encoding: 'utf8' }).trim();
  assert.ok(Number(version.replace(/^v/, '').split('.')[0]) < 24, `${OLD_NODE} is ${version}`);
});

test('berth --version on the older Node prints the package version and nothing else', async () => {
  for (const flag of ['--version', '-v']) {
    const res = await berth([flag]);
    assert.equal(res.code, 0, res.err);
    assert.equal(res.out, `${VERSION}\n`);
  }
});

test('berth serve on the older Node; admin prints tables, and with -o json the bare JSON of the admin API', async () => {
  const server = await servers.serve();
  try {
    await server.waitForOutput(/API token:\s+[0-9a-f-]{36}/);
    const table = await berth(['admin', '--url', server.url, 'accounts', 'list']);
    assert.equal(table.code, 0, table.err);
    // Piped: a table's rows, tab-separated (on a terminal, with a header).
    assert.match(table.out, /^[0-9a-f-]{36}\tdefault\tpro\t/m);
    const accounts = await berth(['admin', '--url', server.url, 'accounts', 'list', '-o', 'json']);
    assert.equal(accounts.code, 0, accounts.err);
    const account = JSON.parse(accounts.out).accounts.find((a: { name: string }) => a.name === 'default');
    assert.ok(account, accounts.out);

    const issued = await berth(['admin', '--url', server.url, 'tokens', 'issue', account.id, '-o', 'json']);
    assert.equal(issued.code, 0, issued.err);
    const { token_id: tokenId } = JSON.parse(issued.out);
    const revoked = await berth(['admin', '--url', server.url, 'tokens', 'revoke', tokenId, '-o', 'json']);
    assert.equal(revoked.code, 0, revoked.err);

    const tokens = await berth(['admin', '--url', server.url, 'tokens', 'list', account.id, '-o', 'json']);
    assert.equal(tokens.code, 0, tokens.err);
    const listed = JSON.parse(tokens.out).api_tokens as Record<string, unknown>[];
    assert.equal(listed.length, 2, 'the first-start token and the issued one');
    assert.deepEqual(Object.keys(listed[0] ?? {}).sort(), ['account_id', 'created_at', 'id', 'revoked_at']);
    assert.equal(listed[0]?.revoked_at, null);
    assert.equal(listed[1]?.id, tokenId);
    assert.match(String(listed[1]?.revoked_at), /^\d{4}-\d\d-\d\dT/);

    const envs = await berth([
      'admin',
      '--url',
      server.url,
      'environments',
      'list',
      account.id,
      '-o',
      'json',
    ]);
    assert.equal(envs.code, 0, envs.err);
    assert.deepEqual(
      JSON.parse(envs.out).environments.map((e: { name: string }) => e.name),
      ['default'],
    );

    const unknown = await berth([
      'admin',
      '--url',
      server.url,
      'tokens',
      'list',
      '00000000-0000-4000-8000-000000000000',
    ]);
    assert.equal(unknown.code, 4, unknown.err);
    assert.equal(unknown.err, 'berth: notfound: Account not found\n');
  } finally {
    assert.equal(await server.kill('SIGTERM'), 0);
  }
});

test('on the older Node, npx berth and npm install warn of no engine: bin/berth.js checks the Node itself', () => {
  const env = { ...process.env, PATH: `${path.dirname(OLD_NODE)}:/usr/bin:/bin` };
  const res = spawnSync('npx', ['berth', '--version'], { cwd: REPO, encoding: 'utf8', env });
  assert.equal(res.status, 0, res.stderr);
  assert.equal(res.stdout, `${VERSION}\n`);
  assert.equal(res.stderr, '');
  // Where npm builds its tree (an install, or npx when the tree changed), it checks each engine.
  const install = spawnSync(
    'npm',
    ['install', '--dry-run', '--ignore-scripts', '--offline', '--no-audit', '--no-fund'],
    { cwd: REPO, encoding: 'utf8', env },
  );
  assert.equal(install.status, 0, install.stderr);
  assert.doesNotMatch(install.stderr, /EBADENGINE[^\n]*\n[^\n]*package: 'berth@/);
});

test('every dependency with an install script is reviewed in allowScripts: npm install warns of none', () => {
  // npm knows an installed package (and so whether allowScripts covers it) by its lockfile entry, found
  // from the package's real path. A node_modules linked in from another checkout (a git worktree's) has
  // its packages' real paths in that checkout, where npm finds them: the check runs there, once that
  // checkout's package.json and lockfile are shown to be this one's.
  const installedBy = path.dirname(fs.realpathSync(path.join(REPO, 'node_modules')));
  if (installedBy !== REPO) {
    for (const file of ['package.json', 'package-lock.json']) {
      assert.equal(
        fs.readFileSync(path.join(installedBy, file), 'utf8'),
        fs.readFileSync(path.join(REPO, file), 'utf8'),
        `node_modules is ${installedBy}'s install: its ${file} must be this one's (else npm install here)`,
      );
    }
  }
  const res = spawnSync('npm', ['install-scripts', 'ls'], {
    cwd: installedBy,
    encoding: 'utf8',
    env: { ...process.env, PATH: `${path.dirname(OLD_NODE)}:/usr/bin:/bin` },
  });
  assert.equal(res.status, 0, res.stderr);
  assert.match(res.stdout, /^No packages with unreviewed install scripts\.$/m);
});
