import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { userCli } from '../helpers/cli.ts';
import { api, type BerthProcess } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * `berth audit` as a user runs it: the real bin against a real `berth serve` (sim), output piped, over
 * an audit log of three services created and one patched through the API.
 */
const servers = serverFixture('sim');
let server: BerthProcess & { url: string };
let token: string;
let patchedId: string;
before(async () => {
  let envUrl: string;
  ({ berth: server, token, envUrl } = await servers.start());
  for (const name of ['audit one', 'audit two', 'audit three']) {
    const res = await api(`${envUrl}/services`, token, 'POST', {
      name,
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 256,
      docker_image: 'acme/hello',
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    patchedId = res.body.data.service.id;
  }
  const patched = await api(`${envUrl}/services/${patchedId}`, token, 'PATCH', { replica_count: 2 });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
});
const { berth, json } = userCli(() => ({ url: server.url, token }));

async function apiData(query: string) {
  const res = await api(`${server.url}/v1/audit-logs${query}`, token);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data;
}

test('-o json prints the API data; the filters reach the API', async () => {
  assert.deepEqual(await json(['audit']), await apiData(''));
  const updates = await json(['audit', '--action', 'service.update']);
  assert.deepEqual(
    updates.audit_logs.map((e: { action: string; resource_id: string }) => [e.action, e.resource_id]),
    [['service.update', patchedId]],
  );
  const aboutPatched = await json(['audit', '--resource-type', 'service', '--resource-id', patchedId]);
  assert.deepEqual(
    aboutPatched.audit_logs.map((e: { action: string }) => e.action),
    ['service.update', 'service.create'],
  );
  assert.equal((await json(['audit', '--since', '2h', '--action', 'service.create'])).audit_logs.length, 3);
  assert.deepEqual((await json(['audit', '--since', '2099-01-01T00:00:00Z'])).audit_logs, []);
  assert.deepEqual((await json(['audit', '--until', '1d'])).audit_logs, []);
});

test('piped: one tab-separated row an entry; a page with more behind says the command for the next', async () => {
  const all = (await json(['audit', '--action', 'service.create'])).audit_logs;
  const first = await berth(['audit', '--action', 'service.create', '--limit', '2']);
  assert.equal(first.code, 0, first.err);
  const rows = first.out.trim().split('\n');
  assert.equal(rows.length, 2);
  assert.match(
    rows[0] as string,
    new RegExp(`^${all[0].created_at}\\tservice\\.create\\tAPI Token\\tservice ${all[0].resource_id}\\t`),
  );
  const next = /^more: berth audit --action service\.create --limit 2 --cursor (\S+)$/m.exec(first.err);
  assert.ok(next, first.err);
  const rest = await json([
    'audit',
    '--action',
    'service.create',
    '--limit',
    '2',
    '--cursor',
    next[1] as string,
  ]);
  assert.deepEqual(
    rest.audit_logs.map((e: { id: string }) => e.id),
    [all[2].id],
  );
  assert.equal(rest.next_cursor, null);
});

test('errors: a time that is neither ISO 8601 nor a span is usage (2); until not after since is validation (5)', async () => {
  const bad = await berth(['audit', '--since', 'yesterday']);
  assert.equal(bad.code, 2, bad.err);
  assert.match(bad.err, /--since takes an ISO 8601 time .* got "yesterday"/);
  const backwards = await berth([
    'audit',
    '--since',
    '2026-11-28T10:00:00Z',
    '--until',
    '2026-11-28T09:00:00Z',
  ]);
  assert.equal(backwards.code, 5, backwards.err);
  assert.match(backwards.err, /^ {2}until: until must be later than since/m);
  const help = await berth(['audit', '--help']);
  assert.match(help.out, /--resource-id <id>/);
  assert.match(help.out, /Examples:\n {2}\$ berth audit --since 2h/);
});
