import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { type BerthProcess, firstStartOf, runBerth, startBerth } from '../helpers/process.ts';

/**
 * The developer commands as a user runs them: the real `berth` bin against a real `berth serve`, with a
 * temporary HOME (so the login context lands in a config directory of its own), output piped (not a
 * terminal), and nothing from the caller's BERTH_* settings.
 */
let db: TestDatabase;
let server: BerthProcess & { url: string };
let token: string;
let home: string;
before(async () => {
  db = await createTestDatabase();
  server = await startBerth({ BERTH_DATA_DIR: db.dataDir, BERTH_DATABASE_URL: db.databaseUrl ?? '' });
  ({ token } = await firstStartOf(server));
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-home-'));
});
after(async () => {
  await server?.kill('SIGTERM');
  await db?.drop();
  fs.rmSync(home, { recursive: true, force: true });
});

const userEnv = () => ({
  HOME: home,
  XDG_CONFIG_HOME: '',
  BERTH_URL: '',
  BERTH_TOKEN: '',
  BERTH_CONTEXT: '',
  BERTH_ENV: '',
  NO_COLOR: '1',
});

async function berth(args: string[], env: Record<string, string> = {}) {
  const proc = runBerth(args, { ...userEnv(), ...env });
  const code = await proc.exited;
  return { code, out: proc.stdout(), err: proc.stderr() };
}

async function json(args: string[]) {
  const res = await berth([...args, '-o', 'json']);
  assert.equal(res.code, 0, res.err);
  return JSON.parse(res.out);
}

const SERVICE = 'hello web';

test('login checks the token, keeps it in the config directory (0600), and whoami uses it', async () => {
  const bad = await berth(['login', '--url', server.url, '--token', '00000000-0000-4000-8000-000000000000']);
  assert.equal(bad.code, 3, bad.err);
  assert.match(bad.err, /^berth: unauthorized: /);
  assert.equal(fs.existsSync(path.join(home, '.config/berth/config.json')), false, 'nothing kept');

  const login = await berth(['login', '--url', server.url, '--token', token]);
  assert.equal(login.code, 0, login.err);
  assert.match(login.err, /Logged in to http:\/\/127\.0\.0\.1:\d+ as context "default"/);
  const file = path.join(home, '.config/berth/config.json');
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.equal(JSON.parse(fs.readFileSync(file, 'utf8')).contexts.default.token, token);

  const me = await json(['whoami']);
  assert.equal(me.url, server.url);
  assert.equal(me.context, 'default');
  assert.deepEqual(me.environments, ['default']);
  assert.ok(!JSON.stringify(me).includes(token), 'the token is not printed');

  // BERTH_URL / BERTH_TOKEN override the context.
  const overridden = await berth(['whoami'], { BERTH_TOKEN: '00000000-0000-4000-8000-000000000000' });
  assert.equal(overridden.code, 3);
});

test('services create from a YAML file; get and ls by name, in JSON, YAML and piped table form', async () => {
  const spec = path.join(home, 'service.yaml');
  fs.writeFileSync(
    spec,
    YAML.stringify({
      name: SERVICE,
      source: 'docker_image',
      type: 'web',
      port: 8080,
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 256,
      docker_image: 'acme/hello',
    }),
  );
  const created = await json(['services', 'create', '-f', spec, '--replicas', '2']);
  assert.equal(created.name, SERVICE);
  assert.equal(created.replica_count, 2, 'flags override the file');

  const got = await json(['services', 'get', SERVICE]);
  assert.equal(got.id, created.id);
  assert.equal(YAML.parse((await berth(['services', 'get', created.id, '-o', 'yaml'])).out).name, SERVICE);

  const listed = await berth(['services', 'ls']);
  assert.equal(listed.code, 0, listed.err);
  // Not a terminal: tab-separated rows, no header, no colour.
  assert.deepEqual(listed.out.trimEnd().split('\t').slice(0, 2), [SERVICE, created.id]);
  assert.doesNotMatch(listed.out, /NAME/);
  assert.ok(!listed.out.includes('\u001b['), 'no colour');

  const invalid = await berth(['services', 'create', '--name', 'bad_name', '--source', 'docker_image']);
  assert.equal(invalid.code, 5);
  assert.match(invalid.err, /^berth: validation: Invalid data\n {2}name: /);
  assert.match(invalid.err, /\n {2}docker_image: docker_image is a required field/);

  const missing = await berth(['services', 'get', 'no such service']);
  assert.equal(missing.code, 4);
  assert.equal(missing.err, 'berth: no service named "no such service" in environment default\n');
  const unknownFlag = await berth(['services', 'ls', '--bogus']);
  assert.equal(unknownFlag.code, 2);
});

test('deploy --wait shows the deployment moving and exits 0 on success, 7 on failure', async () => {
  const ok = await berth([
    'deploy',
    SERVICE,
    '--tag',
    'v2',
    '--note',
    'release 2',
    '--wait',
    '--interval',
    '100',
  ]);
  assert.equal(ok.code, 0, ok.err);
  assert.match(ok.err, /deploying hello web: deployment [0-9a-f-]{36}\n/);
  assert.match(ok.err, /^success \(\d+s\)$/m);
  // The deployment's log, line by line, as it is written.
  assert.match(ok.err, /^ {2}pull: Pulling acme\/hello:v2$/m);
  assert.match(ok.err, /^ {2}outcome: Deployment succeeded$/m);
  assert.match(ok.out, /^state\tsuccess$/m);

  const failed = await berth([
    'deploy',
    SERVICE,
    '--tag',
    'fail-now',
    '--wait',
    '--interval',
    '100',
    '-o',
    'json',
  ]);
  assert.equal(failed.code, 7, failed.err);
  assert.equal(JSON.parse(failed.out).state, 'failed');
  assert.match(failed.err, /berth: deployment [0-9a-f-]{36} failed: .*fail/);

  const deployments = await json(['deployments', 'ls', SERVICE]);
  assert.deepEqual(
    deployments.deployments.map((d: { state: string; docker_image_tag: string }) => [
      d.docker_image_tag,
      d.state,
    ]),
    [
      ['fail-now', 'failed'],
      ['v2', 'success'],
    ],
  );
  const waited = await berth(['deployments', 'wait', deployments.deployments[0].id]);
  assert.equal(waited.code, 7);
});

test("dependencies ls shows what the service's ops.json dependencies were made into, never a password", async () => {
  const spec = path.join(home, 'with-dependencies.yaml');
  const ops = {
    dependencies: {
      s3: { buckets: [{ id: 'files', exports: { BUCKET: '$name' } }] },
      rds: { instances: [{ id: 'db', exports: { DB_PASSWORD: '$password' } }] },
    },
  };
  fs.writeFileSync(
    spec,
    YAML.stringify({
      name: 'stores web',
      source: 'docker_image',
      type: 'web',
      port: 8080,
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 256,
      docker_image: 'acme/stores',
      ops_json: JSON.stringify(ops),
    }),
  );
  assert.equal((await berth(['services', 'create', '-f', spec])).code, 0);
  const deployed = await berth(['deploy', 'stores web', '--wait', '--interval', '100']);
  assert.equal(deployed.code, 0, deployed.err);
  const listed = (await json(['dependencies', 'ls', 'stores web'])).dependencies as {
    kind: string;
    id: string;
    state: string;
    attributes: Record<string, string>;
  }[];
  assert.deepEqual(listed.map((d) => `${d.kind} ${d.id} ${d.state}`).sort(), [
    'rds db available',
    's3 files available',
  ]);
  const table = await berth(['dependencies', 'ls', 'stores web']);
  assert.equal(table.code, 0, table.err);
  const bucket = listed.find((d) => d.kind === 's3');
  assert.match(
    table.out,
    new RegExp(`^s3\\.buckets\\tfiles\\tavailable\\t${bucket?.attributes.name}\\t`, 'm'),
  );
  assert.doesNotMatch(table.out + JSON.stringify(listed), /"password"/);
});

test('logs prints what the service printed; logs -f keeps printing lines as they come', async () => {
  const lines = (await json(['logs', SERVICE, '--tail', '3'])).lines as { time: string; line: string }[];
  assert.ok(lines.length >= 1 && lines.length <= 3, JSON.stringify(lines));
  const following = runBerth(['logs', SERVICE, '-f', '--tail', '1'], userEnv());
  try {
    // The newest line printed so far, then a new one as the service prints it (the sim: one a second).
    const line = /^\d{4}-\d\d-\d\dT[\d:.]+Z \S+ .+\n/m;
    await following.waitForOutput(new RegExp(`${line.source}${line.source.slice(1)}`, 'm'), 30_000);
  } finally {
    await following.kill('SIGTERM');
  }
});

test("events follows the account's changes: from the oldest kept with --after 0, then as they come", async () => {
  const following = runBerth(['events', '--after', '0', '-o', 'json'], userEnv());
  try {
    await following.waitForOutput(/"type":"service\.created"/, 30_000);
    const marker = await berth(['secrets', 'set', SERVICE, 'EVENTS_MARKER=on']);
    assert.equal(marker.code, 0, marker.err);
    await following.waitForOutput(/"type":"secret\.created".*"key":"EVENTS_MARKER"/, 30_000);
    const events = following
      .stdout()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const ids = events.map((e) => BigInt(e.id));
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => (a < b ? -1 : 1)),
    );
    assert.equal(following.stdout().includes('"value"'), false, 'no secret value');
  } finally {
    await following.kill('SIGTERM');
  }
  // The tests below see the service's secrets as they left them.
  const unset = await berth(['secrets', 'unset', SERVICE, 'EVENTS_MARKER']);
  assert.equal(unset.code, 0, unset.err);
  const bad = await berth(['events', '--after', 'yesterday']);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--after takes an event id/);
});

test('secrets set / unset / import keep the other keys; sensitive values are never printed', async () => {
  const set = await berth(['secrets', 'set', SERVICE, 'A=1', 'B=two words', 'URL=https://x.test/?a=b']);
  assert.equal(set.code, 0, set.err);
  assert.equal((await berth(['secrets', 'set', SERVICE, 'PASSWORD=s3cret-value', '--sensitive'])).code, 0);
  const unset = await berth(['secrets', 'unset', SERVICE, 'A']);
  assert.equal(unset.code, 0, unset.err);
  const dotenv = path.join(home, '.env');
  fs.writeFileSync(dotenv, 'FROM_FILE="line one"\n# a comment\nOTHER=2\n');
  assert.equal((await berth(['secrets', 'import', SERVICE, dotenv])).code, 0);

  const listed = (await json(['secrets', 'ls', SERVICE])).secrets as { key: string; value?: string }[];
  assert.deepEqual(
    listed.map((s) => [s.key, s.value]),
    [
      ['B', 'two words'],
      ['FROM_FILE', 'line one'],
      ['OTHER', '2'],
      ['PASSWORD', undefined],
      ['URL', 'https://x.test/?a=b'],
    ],
  );
  assert.equal((await berth(['secrets', 'get', SERVICE, 'B'])).out, 'two words\n');
  const sensitive = await berth(['secrets', 'get', SERVICE, 'PASSWORD']);
  assert.equal(sensitive.code, 2);
  const exported = await berth(['secrets', 'export', SERVICE]);
  assert.equal(
    exported.out,
    'B="two words"\nFROM_FILE="line one"\nOTHER=2\n# PASSWORD is sensitive: its value is write-only\nURL="https://x.test/?a=b"\n',
  );
  const unknown = await berth(['secrets', 'unset', SERVICE, 'NOPE']);
  assert.equal(unknown.code, 4);
  for (const res of [set, unset, exported, sensitive])
    assert.ok(!(res.out + res.err).includes('s3cret-value'));
});

test('two secrets set of different keys at the same time: both keys survive (If-Match, retried on 412)', async () => {
  const keys = ['C1', 'C2', 'C3', 'C4'];
  const results = await Promise.all(
    keys.map((k) => berth(['secrets', 'set', SERVICE, `${k}=${k.toLowerCase()}`])),
  );
  for (const res of results) assert.equal(res.code, 0, res.err);
  const listed = (await json(['secrets', 'ls', SERVICE])).secrets as { key: string }[];
  for (const k of [...keys, 'B', 'PASSWORD'])
    assert.ok(
      listed.some((s) => s.key === k),
      `${k} survived`,
    );
});

test('domains add prints the DNS records to create; envs and contexts list', async () => {
  const added = await berth(['domains', 'add', SERVICE, 'app.example.com']);
  assert.equal(added.code, 0, added.err);
  assert.match(added.out, /^CNAME\tapp\.example\.com\t\S+\troute_app_traffic$/m);
  const domains = await json(['domains', 'ls', SERVICE]);
  assert.equal(domains.custom_domains[0].domain, 'app.example.com');
  assert.equal((await json(['envs', 'ls'])).environments[0].name, 'default');
  assert.equal((await json(['envs', 'get', 'default'])).name, 'default');
  assert.deepEqual((await json(['contexts', 'ls'])).contexts, [
    { name: 'default', url: server.url, env: null, current: true },
  ]);
});

test('berth --help lists every command and the exit codes; completion scripts for bash, zsh and fish (test/process/completion.test.ts)', async () => {
  const help = await berth(['--help']);
  assert.equal(help.code, 0);
  for (const command of [
    'login',
    'logout',
    'whoami',
    'contexts ls',
    'envs ls',
    'envs get',
    'services ls',
    'services get',
    'services create',
    'services patch',
    'services delete',
    'deploy <service>',
    'deployments ls',
    'events',
    'deployments get',
    'deployments wait',
    'secrets ls',
    'secrets get',
    'secrets set',
    'secrets unset',
    'secrets import',
    'secrets export',
    'domains add',
    'domains ls',
    'domains verify',
    'dependencies ls',
    'completion',
  ]) {
    assert.match(help.out, new RegExp(`\\n  berth ${command}`), command);
  }
  assert.match(help.out, /Exit codes:\n {2}0 {2}done/);
  for (const shell of ['bash', 'zsh', 'fish']) {
    const script = await berth(['completion', shell]);
    assert.equal(script.code, 0, script.err);
    assert.match(script.out, /berth/);
  }
});

test('services delete by name; the deleted service no longer lists', async () => {
  const deleted = await berth(['services', 'delete', SERVICE]);
  assert.equal(deleted.code, 0, deleted.err);
  const logged = await berth(['logout']);
  assert.equal(logged.code, 0);
  const notLoggedIn = await berth(['services', 'ls']);
  assert.equal(notLoggedIn.code, 3);
  assert.match(notLoggedIn.err, /not logged in: run berth login/);
});
