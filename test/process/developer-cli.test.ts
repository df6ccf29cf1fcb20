import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { pollUntil } from '../helpers/poll.ts';
import { api, BERTH_BIN, type BerthProcess, runBerth } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * The developer commands as a user runs them: the real `berth` bin against a real `berth serve`, with a
 * temporary HOME (so the login context lands in a config directory of its own), output piped (not a
 * terminal), and nothing from the caller's BERTH_* settings.
 */
const servers = serverFixture('sim');
let server: BerthProcess & { url: string };
let token: string;
let home: string;
before(async () => {
  ({ berth: server, token } = await servers.start());
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-home-'));
});
after(() => {
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
  assert.match(bad.err, /\n {2}the token was refused \(wrong, revoked or expired\): run berth login/);
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
  assert.equal(me.default_env, 'default', 'the environment commands use: the only one');
  assert.ok(!JSON.stringify(me).includes(token), 'the token is not printed');

  // BERTH_URL / BERTH_TOKEN override the context.
  const overridden = await berth(['whoami'], { BERTH_TOKEN: '00000000-0000-4000-8000-000000000000' });
  assert.equal(overridden.code, 3);
  assert.match(overridden.err, /BERTH_TOKEN was refused \(wrong, revoked or expired\)/);
});

test('login --token asked on a terminal does not echo the token; piped, it reads the first line', async () => {
  // A terminal of its own (script(1) runs the command on a pty, and types what it is given).
  const pty = spawn(
    'script',
    [
      '-qec',
      `${process.execPath} ${BERTH_BIN} login --url ${server.url} --context typed --token`,
      '/dev/null',
    ],
    { env: { ...process.env, ...userEnv() }, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let screen = '';
  pty.stdout.on('data', (chunk) => {
    screen += chunk;
  });
  const exited = new Promise((resolve) => pty.on('exit', resolve));
  await pollUntil('the prompt', async () => (screen.includes('API token: ') ? true : undefined));
  pty.stdin.write(`${token}\r`);
  assert.equal(await exited, 0, screen);
  assert.match(screen, /Logged in to .* as context "typed"/);
  assert.ok(!screen.includes(token.slice(0, 8)), `the token is not shown: ${screen}`);

  const piped = runBerth(['login', '--url', server.url, '--context', 'piped'], userEnv(), {
    stdin: `${token}\nsomething else\n`,
  });
  assert.equal(await piped.exited, 0, piped.stderr());
  for (const name of ['typed', 'piped']) assert.equal((await berth(['logout', '--context', name])).code, 0);
  assert.equal((await berth(['contexts', 'use', 'default'])).code, 0);
});

test('BERTH_URL and BERTH_TOKEN work even when the config file is broken', async () => {
  const brokenHome = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-broken-'));
  try {
    fs.mkdirSync(path.join(brokenHome, '.config/berth'), { recursive: true });
    fs.writeFileSync(path.join(brokenHome, '.config/berth/config.json'), '{ not json');
    const env = { HOME: brokenHome };
    const alone = await berth(['envs', 'ls'], { ...env, BERTH_URL: server.url, BERTH_TOKEN: token });
    assert.equal(alone.code, 0, alone.err);
    assert.match(alone.out, /^default\t/);
    const withFile = await berth(['envs', 'ls'], env);
    assert.equal(withFile.code, 2);
    assert.match(withFile.err, /config\.json is not valid JSON/);
  } finally {
    fs.rmSync(brokenHome, { recursive: true, force: true });
  }
});

test('berth help <command> <subcommand> shows that subcommand; an unknown command gets the suggestion and a hint', async () => {
  const help = await berth(['help', 'secrets', 'set']);
  assert.equal(help.code, 0, help.err);
  assert.match(help.out, /^Usage: berth secrets set \[options\] <service> <pairs\.\.\.>/);
  const bogus = await berth(['bogus']);
  assert.equal(bogus.code, 2);
  assert.equal(
    bogus.err,
    "error: unknown command 'bogus'\n(Did you mean logs?)\n(berth --help shows how to use it)\n",
  );
  assert.equal(bogus.out, '');
  assert.deepEqual(await berth(['help', 'bogus']), bogus);
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
  const { service: created } = await json(['services', 'create', '-f', spec, '--replicas', '2']);
  assert.equal(created.name, SERVICE);
  assert.equal(created.replica_count, 2, 'flags override the file');

  const got = await json(['services', 'get', SERVICE]);
  assert.equal(got.service.id, created.id);
  assert.equal(
    YAML.parse((await berth(['services', 'get', created.id, '-o', 'yaml'])).out).service.name,
    SERVICE,
  );

  // Created again from the same file: refused (the API would make a second service of that name).
  const again = await berth(['services', 'create', '-f', spec]);
  assert.equal(again.code, 6, again.err);
  assert.match(
    again.err,
    /^berth: environment default already has a service named "hello web" \([0-9a-f-]{36}\): change it with berth services patch "hello web"/,
  );
  assert.equal((await json(['services', 'ls'])).services.length, 1);

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

  // A file that does not parse: one line saying what and where, without the parser's picture of it.
  const broken = path.join(home, 'broken.yaml');
  fs.writeFileSync(broken, 'name: [unclosed\n');
  const unreadable = await berth(['services', 'create', '-f', broken]);
  assert.equal(unreadable.code, 2);
  assert.equal(
    unreadable.err,
    `berth: ${broken} is neither JSON nor YAML: Flow sequence in block collection must be sufficiently indented and end with a ] at line 2, column 1\n`,
  );
});

test('services create: ops_json as a YAML mapping is sent as its JSON text; a failed --deploy-now names the service created', async () => {
  const spec = path.join(home, 'ops.yaml');
  const service = {
    name: 'ops mapped',
    source: 'docker_image',
    type: 'worker',
    replica_count: 1,
    cpu_count_min: 0.5,
    memory_mb_min: 256,
    docker_image: 'acme/worker',
    ops_json: { deploy_timeout: 5 },
  };
  fs.writeFileSync(spec, YAML.stringify(service));
  const { service: created } = await json(['services', 'create', '-f', spec]);
  assert.deepEqual(JSON.parse(created.ops_json), { deploy_timeout: 5 });

  // The sim provider refuses an image named refuse*: the service is made, its first deployment is not.
  fs.writeFileSync(spec, YAML.stringify({ ...service, name: 'refused once', docker_image: 'refuse' }));
  const refused = await berth(['services', 'create', '-f', spec, '--deploy-now']);
  assert.equal(refused.code, 1, refused.err);
  const [id] = (await json(['services', 'ls'])).services
    .filter((s: { name: string }) => s.name === 'refused once')
    .map((s: { id: string }) => s.id);
  assert.ok(id, 'the service was created');
  assert.match(
    refused.err,
    new RegExp(
      `\\n {2}the service was created \\(refused once, ${id}\\), but its first deployment was not: deploy it with berth deploy ${id} --env default\\n$`,
    ),
  );
});

test('an unknown context is a usage error (2) naming the known ones, for contexts use and logout as for --context', async () => {
  for (const args of [
    ['contexts', 'use', 'nowhere'],
    ['logout', '--context', 'nowhere'],
    ['envs', 'ls', '--context', 'nowhere'],
  ]) {
    const res = await berth(args);
    assert.equal(res.code, 2, `${args.join(' ')}: ${res.err}`);
    assert.match(
      res.err,
      /^berth: no context named "nowhere" \(known: [^)]*default[^)]*\): run berth login --context nowhere\n$/,
    );
  }
});

test('deploy --wait prints the log to its end, then the outcome and a short summary; exit 0, or 7 on failure', async () => {
  const ok = await berth(['deploy', SERVICE, '--tag', 'v2', '--note', 'release 2', '--wait']);
  assert.equal(ok.code, 0, ok.err);
  assert.match(ok.err, /deploying hello web: deployment [0-9a-f-]{36}\n/);
  // The deployment's log, line by line as it is written, to its last line; then the outcome.
  assert.match(ok.err, /^ {2}pull: Pulling acme\/hello:v2$/m);
  assert.match(ok.err, /^ {2}outcome: Deployment succeeded\nsuccess \(\d+s\)\n$/m);
  // The summary: what was deployed and how it ended, without empty fields or zero ids.
  assert.deepEqual(
    ok.out
      .trim()
      .split('\n')
      .map((line) => line.split('\t')[0]),
    ['id', 'state', 'docker_image_tag', 'docker_image_digest', 'note', 'created_at', 'updated_at'],
  );
  assert.match(ok.out, /^state\tsuccess$/m);
  assert.doesNotMatch(ok.out, /00000000-0000-0000-0000-000000000000/);

  const failed = await berth(['deploy', SERVICE, '--tag', 'fail-now', '--wait', '-o', 'json']);
  assert.equal(failed.code, 7, failed.err);
  assert.equal(JSON.parse(failed.out).deployment.state, 'failed');
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
  const deployed = await berth(['deploy', 'stores web', '--wait']);
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

test('dependencies backups: create --wait, ls, restore needs --force while the service runs, then --wait', async () => {
  const created = await berth([
    'dependencies',
    'backups',
    'create',
    'stores web',
    'db',
    '--wait',
    '-o',
    'json',
  ]);
  assert.equal(created.code, 0, created.err);
  const { backup } = JSON.parse(created.out);
  assert.equal(backup.state, 'completed');
  assert.ok(backup.size_bytes > 0);
  const listed = await json(['dependencies', 'backups', 'ls', 'stores web', 'db']);
  assert.deepEqual(
    listed.backups.map((b: { id: string }) => b.id),
    [backup.id],
  );
  const table = await berth(['dependencies', 'backups', 'ls', 'stores web', 'db']);
  assert.match(table.out, new RegExp(`^${backup.id}\\tcompleted\\tmanual\\t${backup.size_bytes}\\t`, 'm'));

  const refused = await berth(['dependencies', 'backups', 'restore', 'stores web', 'db', backup.id]);
  assert.equal(refused.code, 6, refused.err);
  assert.match(refused.err, /in use by service .*"force": true \(the CLI's --force\) to stop it/);
  const restored = await berth([
    ...['dependencies', 'backups', 'restore', 'stores web', 'db', backup.id],
    ...['--force', '--wait'],
  ]);
  assert.equal(restored.code, 0, restored.err);
  assert.match(restored.err, /stopped for the restore: service [0-9a-f-]{36}/);
  assert.match(restored.out, /^restore\t\{"state":"completed"/m);

  const bucket = await berth(['dependencies', 'backups', 'create', 'stores web', 'files']);
  assert.equal(bucket.code, 6, bucket.err);
  assert.match(bucket.err, /s3 buckets have no backups/);
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

test('a reader that stops early ends a command quietly: logs -f | head -1 exits 0 with no EPIPE trace', async () => {
  // -f prints again a second later (the sim), after head has gone: that write meets the closed pipe.
  const pipeline = spawn(
    'bash',
    ['-c', `set -o pipefail; "${process.execPath}" "${BERTH_BIN}" logs "${SERVICE}" -f --tail 1 | head -1`],
    { env: { ...process.env, ...userEnv() }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  pipeline.stdout.on('data', (chunk) => {
    out += chunk;
  });
  pipeline.stderr.on('data', (chunk) => {
    err += chunk;
  });
  const code = await new Promise((resolve) => pipeline.on('exit', resolve));
  assert.equal(code, 0, err);
  assert.equal(err, '');
  assert.match(out, /^\d{4}-\d\d-\d\dT[\d:.]+Z \S+ .+\n$/);
});

test("metrics prints charts, or with -o json the API's data for the range; a bad --since is a usage error", async () => {
  const data = await json(['metrics', SERVICE, '--since', '1d']);
  assert.equal(Date.parse(data.to) - Date.parse(data.from), 86_400_000);
  assert.equal(data.step, 300, "the API's default step for a day");
  assert.ok(Array.isArray(data.points) && Array.isArray(data.deployments));
  const drawn = await berth(['metrics', SERVICE]);
  assert.equal(drawn.code, 0, drawn.err);
  // Charts once the collector sampled it (once a minute), else a line that says so.
  assert.match(drawn.out, /^hello web: the last 1h|^No samples of hello web in the last 1h/);
  const bad = await berth(['metrics', SERVICE, '--since', 'yesterday']);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--since takes a duration such as 1h, 1d or 1w \(got "yesterday"\)/);
});

test("events follows the account's changes: from the oldest kept with --after 0, then as they come; secrets set reports only the key it set", async () => {
  const following = runBerth(['events', '--after', '0', '-o', 'json'], userEnv());
  try {
    await following.waitForOutput(/"type":"service\.created"/, 30_000);
    const kept = await berth(['secrets', 'set', SERVICE, 'EVENTS_KEPT=1']);
    assert.equal(kept.code, 0, kept.err);
    const marker = await berth(['secrets', 'set', SERVICE, 'EVENTS_MARKER=on']);
    assert.equal(marker.code, 0, marker.err);
    await following.waitForOutput(/"type":"secret\.created".*"key":"EVENTS_MARKER"/, 30_000);
    const events = following
      .stdout()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    // `secrets set` of one key changes that key alone: the key set before is neither deleted nor
    // created again.
    assert.deepEqual(
      events
        .filter((e) => String(e.type).startsWith('secret.'))
        .map((e) => `${e.type}:${/"key":"(\w+)"/.exec(JSON.stringify(e))?.[1]}`),
      ['secret.created:EVENTS_KEPT', 'secret.created:EVENTS_MARKER'],
    );
    const ids = events.map((e) => BigInt(e.id));
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => (a < b ? -1 : 1)),
    );
    // Other events may carry a `value` (an alert's reading); a secret's event never does.
    const secretEvents = events.filter((e) => String(e.type).startsWith('secret.'));
    assert.equal(
      secretEvents.some((e) => JSON.stringify(e).includes('"value"')),
      false,
      'no secret value',
    );
  } finally {
    await following.kill('SIGTERM');
  }
  // The tests below see the service's secrets as they left them.
  const unset = await berth(['secrets', 'unset', SERVICE, 'EVENTS_MARKER', 'EVENTS_KEPT']);
  assert.equal(unset.code, 0, unset.err);
  const bad = await berth(['events', '--after', 'yesterday']);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--after takes an event id/);
});

test('secrets set / unset / import keep the other keys; sensitive values are never printed', async () => {
  const set = await berth(['secrets', 'set', SERVICE, 'A=1', 'B=two words', 'URL=https://x.test/?a=b']);
  assert.equal(set.code, 0, set.err);
  const sensitiveSet = await berth([
    'secrets',
    'set',
    SERVICE,
    'PASSWORD=s3cret-value',
    'PLAIN=p',
    '--sensitive',
    'PASSWORD',
  ]);
  assert.equal(sensitiveSet.code, 0, sensitiveSet.err);
  assert.equal(
    (await berth(['secrets', 'get', SERVICE, 'PLAIN'])).out,
    'p\n',
    'only the key named is write-only',
  );
  assert.equal((await berth(['secrets', 'unset', SERVICE, 'PLAIN'])).code, 0);
  const notAPair = await berth(['secrets', 'set', SERVICE, 'X=1', '--sensitive', 'Y']);
  assert.equal(notAPair.code, 2);
  assert.match(notAPair.err, /--sensitive Y: no Y=VALUE among the pairs/);
  // A bad key is named as typed, not as an index into the list the CLI sent.
  const badKey = await berth(['secrets', 'set', SERVICE, 'A=1', 'B=2', 'bad key=3']);
  assert.equal(badKey.code, 5, badKey.err);
  assert.match(badKey.err, /\n {2}"bad key": /);
  assert.doesNotMatch(badKey.err, /secrets\[/);
  const unset = await berth(['secrets', 'unset', SERVICE, 'A']);
  assert.equal(unset.code, 0, unset.err);
  const dotenv = path.join(home, '.env');
  // A line dotenv would skip (a space in the key) refuses the whole file, naming the line, not its value.
  fs.writeFileSync(dotenv, 'FROM_FILE="line one"\nDATABASE URL=s3cret-value\n');
  const typo = await berth(['secrets', 'import', SERVICE, dotenv]);
  assert.equal(typo.code, 2, typo.err);
  assert.match(typo.err, /line 2 \("DATABASE URL" before its =\) is not KEY=VALUE .*; nothing was imported/);
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
  for (const res of [set, unset, exported, sensitive, typo])
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
  assert.equal(domains.custom_domain.pending_domain.domain, 'app.example.com');
  assert.equal((await json(['envs', 'ls'])).environments[0].name, 'default');
  assert.equal((await json(['envs', 'get', 'default'])).environment.name, 'default');
  assert.deepEqual((await json(['contexts', 'ls'])).contexts, [
    { name: 'default', url: server.url, env: null, current: true },
  ]);
});

test('tokens create prints the token once; ls lists it without it; revoke ends it', async () => {
  const env = { BERTH_URL: server.url, BERTH_TOKEN: token };
  const run = async (...args: string[]) => {
    const res = await berth([...args, '-o', 'json'], env);
    assert.equal(res.code, 0, res.err);
    return JSON.parse(res.out);
  };
  const made = (
    await run('tokens', 'create', 'ci', '--role', 'developer', '--environment', 'default', '--read-only')
  ).token;
  assert.match(made.token, /^[0-9a-f-]{36}$/);
  assert.deepEqual([made.name, made.role, made.read_only], ['ci', 'developer', true]);
  assert.equal(made.environment_ids.length, 1);
  assert.equal((await api(`${server.url}/v1/environments`, made.token)).status, 200);
  const listed = (await run('tokens', 'ls')).tokens;
  const entry = listed.find((t: { id: string }) => t.id === made.id);
  assert.equal(entry.token, undefined);
  const table = await berth(['tokens', 'ls'], env);
  assert.match(table.out, new RegExp(`${made.id}\tci\tdeveloper \\(read-only\\)`));
  // The token the commands run with is marked, and only it.
  const inUse = listed.filter((t: { current: boolean }) => t.current);
  assert.equal(inUse.length, 1);
  assert.match(table.out, new RegExp(`^${inUse[0].id}\t[^\t]+ \\(this one\\)\t`, 'm'));
  assert.equal(table.out.match(/\(this one\)/g)?.length, 1);
  assert.ok(!table.out.includes(made.token), 'never printed again');
  assert.deepEqual(await run('tokens', 'revoke', made.id), { revoked: true });
  assert.equal((await api(`${server.url}/v1/environments`, made.token)).status, 401);
  const higher = await berth(['tokens', 'create', 'x', '--role', 'superuser'], env);
  assert.equal(higher.code, 2, higher.err);
  // --expires: a date alone is that day's start in UTC; anything else is refused naming the flag.
  const dated = (await run('tokens', 'create', 'dated', '--role', 'viewer', '--expires', '2099-01-31')).token;
  assert.equal(dated.expires_at, '2099-01-31T00:00:00.000Z');
  const vague = await berth(['tokens', 'create', 'vague', '--role', 'viewer', '--expires', 'next week'], env);
  assert.equal(vague.code, 2, vague.err);
  assert.equal(
    vague.err.trim(),
    'berth: --expires takes a date (2027-01-31, midnight UTC) or a time with its zone (2027-01-31T09:00:00Z); got "next week"',
  );
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
    'deployments cancel',
    'rollback <service>',
    'restart <service>',
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
    'tokens create',
    'tokens ls',
    'tokens revoke',
    'webhooks create',
    'webhooks ls',
    'webhooks get',
    'webhooks delete',
    'webhooks deliveries',
    'webhooks redeliver',
    'audit',
    'alerts ls',
    'alerts rules <service>',
    'alerts rules set',
    'dependencies backups ls',
    'dependencies backups create',
    'dependencies backups restore',
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

test('-o json prints exactly what the API answered (its data), the same shape as a direct call', async () => {
  const envId = (await json(['envs', 'get', 'default'])).environment.id as string;
  const { service } = await json(['services', 'get', SERVICE]);
  const serviceUrl = `${server.url}/v1/environments/${envId}/services/${service.id}`;
  const data = async (url: string) => {
    const res = await api(url, token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.data;
  };
  const [deployment] = (await json(['deployments', 'ls', SERVICE])).deployments;
  const pairs: [string[], string][] = [
    [['envs', 'get', 'default'], `${server.url}/v1/environments/${envId}`],
    [['services', 'get', SERVICE], serviceUrl],
    [['domains', 'ls', SERVICE], `${serviceUrl}/custom-domains`],
    [['deployments', 'ls', SERVICE], `${serviceUrl}/deployments`],
    [['deployments', 'get', deployment.id], `${server.url}/v1/deployments/${deployment.id}`],
    [['secrets', 'ls', SERVICE], `${serviceUrl}/secrets`],
    [['dependencies', 'ls', SERVICE], `${serviceUrl}/dependencies`],
  ];
  for (const [args, url] of pairs) {
    const [cli, direct] = [await json(args), await data(url)];
    // Shapes: the same keys at every level (live fields such as run_status may move between reads).
    const shape = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(shape)
        : value && typeof value === 'object'
          ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shape(v)]))
          : typeof value;
    assert.deepEqual(shape(cli), shape(direct), args.join(' '));
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
  assert.deepEqual(await berth(['logout']), {
    code: 3,
    out: '',
    err: 'berth: not logged in: no context to forget\n',
  });
});
