import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * Concurrent writes to one service: every PATCH merges onto the row as it stands when its transaction
 * holds the lock, so none is lost, and protection set by one PATCH is never undone by another nor
 * overtaken by a DELETE.
 */
let h: Harness;
let t: Tenant;
let connectionId: string;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 1_000_000 });
  t = await h.tenant();
  connectionId = await h.gitConnection(t, 'github');
});
after(() => h.close());

type Body = Record<string, unknown>;
const servicesUrl = () => `/v1/environments/${t.envId}/services`;
const serviceUrl = (id: string) => `${servicesUrl()}/${id}`;

async function create(body: Body): Promise<string> {
  const res = await h.request('POST', servicesUrl(), { token: t.token, body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.service.id;
}

const patch = (id: string, body: Body) => h.request('PATCH', serviceUrl(id), { token: t.token, body });

/** One field per PATCH, each to a value the service does not have yet (a github web service). */
function distinctChanges(round: number): Body[] {
  return [
    { name: `Raced App ${'X'.repeat(round + 1)}` },
    { port: 4000 + round },
    { replica_count: 3 + round },
    { cpu_count_min: 0.25 },
    { cpu_count_max: 8 },
    { memory_mb_min: 128 },
    { memory_mb_max: 4096 },
    { prov_node_group_id: randomUUID() },
    { is_protected: true },
    { installation_id: connectionId },
    { git_repo_full_name: `acme/raced-${round}` },
    { git_repo_branch: `branch-${round}` },
    { auto_deploy: true },
    { dockerfile_path: 'docker/Dockerfile' },
    { build_context: 'app' },
    { run_command: `serve --round ${round}` },
    { ops_json_path: 'deploy/ops.json' },
    { enable_previews: true },
    { enable_code_review: true },
    // Changes nothing, yet writes the whole merged row: merged onto a stale row it would undo the others.
    {},
  ];
}

test('20 rounds of 20 concurrent PATCHes of one service: every update survives', async () => {
  for (let round = 0; round < 20; round++) {
    const id = await create({ ...VALID_SERVICE.github });
    const changes = distinctChanges(round);
    assert.equal(changes.length, 20);
    const answers = await Promise.all(changes.map((body) => patch(id, body)));
    for (const res of answers) assert.equal(res.status, 200, JSON.stringify(res.body));
    // Read as stored, every column that the PATCHes wrote.
    const got: Body = await h.deps.store.db
      .selectFrom('services')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    const expected = Object.assign({}, ...changes);
    for (const [field, value] of Object.entries(expected)) {
      assert.deepEqual(got[field], value, `round ${round}: ${field} survived the concurrent PATCHes`);
    }
    const audits = await h.request('GET', '/v1/audit-logs?limit=100', { token: t.token });
    const updates = (audits.body.data.audit_logs as { action: string; resource_id: string }[]).filter(
      (a) => a.resource_id === id && a.action === 'service.update',
    );
    assert.equal(updates.length, 20, 'one audit entry per PATCH');
  }
});

test('50 rounds: PATCH is_protected racing other PATCHes and a DELETE never loses protection nor deletes a protected service', async () => {
  for (let round = 0; round < 50; round++) {
    const id = await create({ ...VALID_SERVICE.docker });
    const [protect, del, ...others] = await Promise.all([
      patch(id, { is_protected: true }),
      h.request('DELETE', serviceUrl(id), { token: t.token }),
      patch(id, { name: 'Other Name' }),
      patch(id, { port: 9000 + round }),
      patch(id, { replica_count: 4 }),
      patch(id, {}),
    ]);
    const got = (await h.request('GET', serviceUrl(id), { token: t.token })).body.data.service;
    if (protect.status === 200) {
      // Protection committed first: the DELETE saw it.
      assert.equal(del.status, 409, `round ${round}: ${JSON.stringify(del.body)}`);
      assert.equal(got.is_protected, true, `round ${round}: protection was lost`);
      assert.ok(!got.state.startsWith('delete'), `round ${round}: a protected service is ${got.state}`);
      for (const res of others) assert.equal(res.status, 200, JSON.stringify(res.body));
      const again = await h.request('DELETE', serviceUrl(id), { token: t.token });
      assert.equal(again.status, 409, `round ${round}: a protected service was deleted`);
    } else {
      // The DELETE committed first: the service was never protected, and the protect PATCH was refused.
      assert.equal(protect.status, 403, `round ${round}: ${JSON.stringify(protect.body)}`);
      assert.equal(del.status, 202, `round ${round}: ${JSON.stringify(del.body)}`);
      assert.equal(got.is_protected, false);
      assert.ok(got.state.startsWith('delete'), `round ${round}: ${got.state}`);
    }
  }
});

test('50 rounds: a protected service stays protected while other PATCHes race a DELETE', async () => {
  for (let round = 0; round < 50; round++) {
    const id = await create({ ...VALID_SERVICE.docker });
    const answers = await Promise.all([
      patch(id, { is_protected: true }),
      patch(id, { name: 'Other Name' }),
      patch(id, { port: 9000 + round }),
      patch(id, { memory_mb_min: 512 }),
      patch(id, {}),
    ]);
    for (const res of answers) assert.equal(res.status, 200, JSON.stringify(res.body));
    const [del, ...more] = await Promise.all([
      h.request('DELETE', serviceUrl(id), { token: t.token }),
      patch(id, { replica_count: 5 }),
      patch(id, { name: 'Third Name' }),
    ]);
    assert.equal(del.status, 409, `round ${round}: a protected service was deleted`);
    for (const res of more) assert.equal(res.status, 200, JSON.stringify(res.body));
    const got = (await h.request('GET', serviceUrl(id), { token: t.token })).body.data.service;
    assert.equal(got.is_protected, true, `round ${round}: protection was lost`);
    assert.equal(got.port, 9000 + round);
    assert.equal(got.memory_mb_min, 512);
    assert.equal(got.replica_count, 5);
  }
});
