import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { userCli } from '../helpers/cli.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * `berth alerts ...` as a user runs them: the real bin against a real `berth serve` (sim), output piped.
 * A deploy of a tag starting with `fail` fails on the sim provider, which opens `deploy_failed`.
 */
const servers = serverFixture('sim');
let server: BerthProcess & { url: string };
let token: string;
let serviceUrl: string;
const SERVICE = 'alerting web';
before(async () => {
  let envUrl: string;
  ({ berth: server, token, envUrl } = await servers.start());
  const res = await api(`${envUrl}/services`, token, 'POST', {
    name: SERVICE,
    source: 'docker_image',
    type: 'worker',
    replica_count: 1,
    cpu_count_min: 0.5,
    memory_mb_min: 256,
    docker_image: 'acme/hello',
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  serviceUrl = `${envUrl}/services/${res.body.data.service.id}`;
});
const { berth, json } = userCli(() => ({ url: server.url, token }));
/** Where the tests write the rule files they pass to -f. */
const files = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-alert-rules-'));
after(() => fs.rmSync(files, { recursive: true, force: true }));

async function apiData(url: string) {
  const res = await api(url, token);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data;
}

test('alerts rules shows each rule, its settings and the default where it differs; -o json is the API data', async () => {
  const shown = await berth(['alerts', 'rules', SERVICE]);
  assert.equal(shown.code, 0, shown.err);
  assert.match(shown.out, /^crash_loop\tyes\trestarts 3, minutes 10$/m);
  assert.match(shown.out, /^memory_high\tyes\tpercent 90, minutes 5$/m);
  assert.match(shown.out, /^deploy_failed\tyes\t$/m);
  assert.deepEqual(await json(['alerts', 'rules', SERVICE]), await apiData(`${serviceUrl}/alert-rules`));
});

test('alerts rules set replaces the settings: what it leaves out goes back to the default', async () => {
  const set = await berth([
    'alerts',
    'rules',
    'set',
    SERVICE,
    'memory_high.percent=80',
    'error_rate_high.enabled=false',
  ]);
  assert.equal(set.code, 0, set.err);
  assert.match(
    set.err,
    /^replaced the alert settings of alerting web: whatever was left out takes its default$/m,
  );
  assert.match(set.out, /^memory_high\tyes\tpercent 80 \(default 90\), minutes 5$/m);
  assert.match(set.out, /^error_rate_high\tno \(default yes\)\tpercent 5, min_requests 20, minutes 5$/m);
  const stored = (await apiData(`${serviceUrl}/alert-rules`)).rules;
  assert.equal(stored.memory_high.percent, 80);
  assert.equal(stored.error_rate_high.enabled, false);

  const replaced = await json(['alerts', 'rules', 'set', SERVICE, 'crash_loop.minutes=5']);
  assert.deepEqual(replaced, await apiData(`${serviceUrl}/alert-rules`));
  assert.equal(replaced.rules.crash_loop.minutes, 5);
  assert.equal(replaced.rules.memory_high.percent, 90);
  assert.equal(replaced.rules.error_rate_high.enabled, true);

  // A file: the PUT body, or what `alerts rules -o yaml` prints (its rules taken, its defaults left).
  const file = path.join(files, 'rules.yaml');
  fs.writeFileSync(file, 'memory_high:\n  minutes: 10\nno_ready_replica:\n  enabled: false\n');
  const fromFile = await json(['alerts', 'rules', 'set', SERVICE, '-f', file, 'memory_high.percent=70']);
  assert.deepEqual(fromFile.rules.memory_high, { enabled: true, percent: 70, minutes: 10 });
  assert.equal(fromFile.rules.no_ready_replica.enabled, false);
  fs.writeFileSync(file, (await berth(['alerts', 'rules', SERVICE, '-o', 'yaml'])).out);
  const roundTrip = await json(['alerts', 'rules', 'set', SERVICE, '-f', file]);
  assert.deepEqual(roundTrip.rules, fromFile.rules);

  const reset = await json(['alerts', 'rules', 'set', SERVICE, '--defaults']);
  assert.deepEqual(reset.rules, reset.defaults);
  assert.deepEqual((await apiData(`${serviceUrl}/alert-rules`)).rules, reset.defaults);
});

test('alerts rules set errors: out of range and unknown are validation (5), a malformed setting usage (2)', async () => {
  const range = await berth(['alerts', 'rules', 'set', SERVICE, 'memory_high.percent=500']);
  assert.equal(range.code, 5, range.err);
  assert.match(range.err, /^ {2}memory_high\.percent: .*at most 100$/m);
  const unknown = await berth(['alerts', 'rules', 'set', SERVICE, 'memory_hi.percent=50']);
  assert.equal(unknown.code, 5, unknown.err);
  assert.match(unknown.err, /^ {2}memory_hi: unknown field "memory_hi"/m);
  for (const [args, message] of [
    [['x=1'], /"x=1" is not RULE\.FIELD=VALUE/],
    [['memory_high.percent=high'], /a setting's value is true, false or a number/],
    [[], /give RULE\.FIELD=VALUE settings, -f FILE, or --defaults/],
    [['--defaults', 'memory_high.percent=50'], /--defaults takes no other settings/],
    [['-f', path.join(files, 'missing.yaml')], /cannot read .*missing\.yaml/],
  ] as const) {
    const res = await berth(['alerts', 'rules', 'set', SERVICE, ...args]);
    assert.equal(res.code, 2, `${args.join(' ')}: ${res.err}`);
    assert.match(res.err, message);
  }
  const missing = await berth(['alerts', 'rules', 'nobody here']);
  assert.equal(missing.code, 4, missing.err);
  assert.equal((await apiData(`${serviceUrl}/alert-rules`)).rules.memory_high.percent, 90, 'nothing changed');
});

test('alerts ls: a failed deployment opens deploy_failed, a good one resolves it', async () => {
  assert.equal((await berth(['deploy', SERVICE, '--tag', 'fail-1', '--wait'])).code, 7);
  const opened = await pollUntil('deploy_failed open', async () => {
    const { alerts } = await json(['alerts', 'ls', SERVICE]);
    return alerts.find(
      (a: { rule: string; state: string }) => a.rule === 'deploy_failed' && a.state === 'open',
    );
  });
  assert.deepEqual(await json(['alerts', 'ls', SERVICE]), await apiData(`${serviceUrl}/alerts`));
  const piped = await berth(['alerts', 'ls', SERVICE]);
  assert.equal(piped.code, 0, piped.err);
  assert.match(
    piped.out,
    new RegExp(`^deploy_failed\\topen\\t${opened.opened_at}\\t\\t\\t.+\\t${opened.id}$`, 'm'),
  );

  assert.equal((await berth(['deploy', SERVICE, '--tag', 'v1', '--wait'])).code, 0);
  await pollUntil('deploy_failed resolved', async () => {
    const { alerts } = await json(['alerts', 'ls', SERVICE, '--limit', '1']);
    return alerts[0]?.id === opened.id && alerts[0].state === 'resolved' ? true : undefined;
  });
  const resolved = await berth(['alerts', 'ls', SERVICE]);
  assert.match(resolved.out, new RegExp(`^deploy_failed\\tresolved\\t${opened.opened_at}\\t\\S+\\t`, 'm'));
  const help = await berth(['alerts', 'rules', 'set', '--help']);
  assert.match(help.out, /Examples:\n {2}\$ berth alerts rules set "hello web" memory_high\.percent=80/);
});
