import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { simTables } from '../../src/providers/sim/tables.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  await h.startWorker();
  t = await h.tenant();
});
after(() => h.close());

const base = () => `/v1/environments/${t.envId}/services`;

async function createService(body: Record<string, unknown>, tenant = t) {
  const res = await h.request('POST', `/v1/environments/${tenant.envId}/services`, {
    token: tenant.token,
    body,
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.service as { id: string; subdomain: string; state: string };
}

async function getService(id: string, tenant = t) {
  const res = await h.request('GET', `/v1/environments/${tenant.envId}/services/${id}`, {
    token: tenant.token,
  });
  assert.equal(res.status, 200);
  return res.body.data;
}

async function serviceReaches(id: string, state: string, tenant = t) {
  return pollUntil(`service ${id} to be ${state}`, async () => {
    const data = await getService(id, tenant);
    return data.service.state === state ? data : undefined;
  });
}

async function deploy(serviceId: string, body: Record<string, unknown> = {}) {
  const res = await h.request('POST', `${base()}/${serviceId}/deploy`, { token: t.token, body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.deployment_id as string;
}

async function deploymentEnds(id: string) {
  return pollUntil(`deployment ${id} to end`, async () => {
    const res = await h.request('GET', `/v1/deployments/${id}`, { token: t.token });
    const d = res.body.data.deployment;
    return d.state === 'success' || d.state === 'failed' ? d : undefined;
  });
}

describe('deployments', () => {
  test('create with deploy_now ends running, with a successful first deployment and live status', async () => {
    const created = await createService({ ...VALID_SERVICE.docker, deploy_now: true });
    assert.equal(created.state, 'deploy_pending', 'the create response shows deploy_pending (spec)');
    const data = await serviceReaches(created.id, 'running');
    assert.equal(data.run_status, 'running');
    assert.equal(data.ready_count, 2);
    assert.equal(data.service.latest_deployment.state, 'success');
    assert.equal(data.service.latest_deployment.docker_image_tag, 'latest');
    assert.equal(data.service.latest_deployment.type, 'service_update');
    assert.notEqual(data.svc_alias, '');
    assert.equal(data.service.namespace_name, `env-${t.envId.slice(0, 8)}`);
  });

  test('a fail... target fails the deployment and the service; a later good deploy brings it back to running', async () => {
    const service = await createService(VALID_SERVICE.docker);
    const bad = await deploy(service.id, { docker_image_tag: 'fail-on-purpose', note: 'expected to fail' });
    const failed = await deploymentEnds(bad);
    assert.equal(failed.state, 'failed');
    assert.equal(failed.note, 'expected to fail');
    assert.match(failed.failure_reason, /fail-on-purpose/);
    await serviceReaches(service.id, 'deploy_failed');

    const good = await deploy(service.id, { docker_image_tag: 'v2' });
    const succeeded = await deploymentEnds(good);
    assert.equal(succeeded.state, 'success');
    assert.equal(succeeded.prev_deployment_id, bad);
    await serviceReaches(service.id, 'running');
  });

  test('GET deployment has the spec shape: empty op_ids and ops, zero UUIDs, unused targets empty', async () => {
    const service = await createService(VALID_SERVICE.github);
    const id = await deploy(service.id, { commit_id: 'abc1234' });
    const d = await deploymentEnds(id);
    assert.deepEqual(d.op_ids, []);
    assert.deepEqual(d.ops, {});
    assert.equal(d.created_by_id, '00000000-0000-0000-0000-000000000000');
    assert.equal(d.prev_deployment_id, '00000000-0000-0000-0000-000000000000');
    assert.equal(d.git_commit_ref, 'abc1234');
    assert.equal(d.docker_image_tag, '');
    assert.equal(d.helm_chart_version, '');
    assert.equal(d.service_id, service.id);
    assert.equal(d.private_instance_id, t.envId);
    assert.equal(d.account_id, t.accountId);
    assert.match(d.git_commit_author, /^.+ <.+@.+>$/);
    assert.match(d.git_commit_message, /abc1234/);
    assert.equal(d.docker_image_digest, '');
  });

  test('a deployment records what it actually ran: the branch head as a commit id, an image tag as a digest', async () => {
    const git = await createService(VALID_SERVICE.github);
    const head = await deploymentEnds(await deploy(git.id, {}));
    assert.match(head.git_commit_ref, /^[0-9a-f]{40}$/);
    assert.match(head.git_commit_author, /^.+ <.+@.+>$/);
    assert.notEqual(head.git_commit_message, '');

    const image = await createService(VALID_SERVICE.docker);
    const latest = await deploymentEnds(await deploy(image.id, {}));
    assert.equal(latest.docker_image_tag, 'latest');
    assert.match(latest.docker_image_digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal(latest.git_commit_ref, '');
  });

  test('deploy targets must fit the source, one at a time', async () => {
    const service = await createService(VALID_SERVICE.docker);
    const cases: [Record<string, unknown>, string][] = [
      [{ commit_id: 'abc' }, 'commit_id'],
      [{ helm_chart_version: '1.0.0' }, 'helm_chart_version'],
      [{ docker_image_tag: 'has space' }, 'docker_image_tag'],
      [{ docker_image_tag: 'v1', note: 'x'.repeat(301) }, 'note'],
    ];
    for (const [body, field] of cases) {
      const res = await h.request('POST', `${base()}/${service.id}/deploy`, { token: t.token, body });
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(res.body.errors[0].field, field);
    }
    const git = await createService(VALID_SERVICE.github);
    const two = await h.request('POST', `${base()}/${git.id}/deploy`, {
      token: t.token,
      body: { commit_id: 'abc', docker_image_tag: 'v1' },
    });
    assert.equal(two.status, 422);
    assert.deepEqual(
      two.body.errors.map((e: { field: string }) => e.field),
      ['docker_image_tag'],
    );
    // A pull request's branch outside preview mode would deploy the configured branch's head instead.
    for (const body of [{ branch: 'feature-x' }, { preview: false, branch: 'feature-x', pr_number: 3 }]) {
      const res = await h.request('POST', `${base()}/${git.id}/deploy`, { token: t.token, body });
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.deepEqual(
        res.body.errors,
        Object.keys(body)
          .filter((k) => k !== 'preview')
          .map((field) => ({ field, error: `${field} is only for a preview deployment (preview: true)` })),
      );
    }
  });

  test('deployments of one service run one at a time, in creation order', async () => {
    const service = await createService(VALID_SERVICE.docker);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await deploy(service.id, { docker_image_tag: `v${i}` }));
    const ended = [];
    for (const id of ids) ended.push(await deploymentEnds(id));
    for (let i = 1; i < ended.length; i++) {
      assert.equal(ended[i].prev_deployment_id, ids[i - 1]);
      assert.ok(ended[i].updated_at >= ended[i - 1].updated_at, 'a later deployment never finishes first');
    }
    const list = await h.request('GET', `${base()}/${service.id}/deployments?limit=2`, { token: t.token });
    assert.deepEqual(
      list.body.data.deployments.map((d: { id: string }) => d.id),
      [ids[3], ids[2]],
    );
    const rest = await h.request(
      'GET',
      `${base()}/${service.id}/deployments?limit=2&cursor=${list.body.data.next_cursor}`,
      {
        token: t.token,
      },
    );
    assert.deepEqual(
      rest.body.data.deployments.map((d: { id: string }) => d.id),
      [ids[1], ids[0]],
    );
    const live = await getService(service.id);
    assert.equal(live.service.latest_deployment.id, ids[3]);
    assert.equal(live.service.latest_deployment.docker_image_tag, 'v3');
  });

  test('a provider refusing deploy_now at once: 500 with the spec body and the service id header; deploy_failed with the reason', async () => {
    const res = await h.request('POST', base(), {
      token: t.token,
      body: { ...VALID_SERVICE.docker, docker_image: 'refuse/me', deploy_now: true },
    });
    assert.equal(res.status, 500);
    assert.deepEqual(res.body, {
      error_code: 'unknown',
      message: 'Service created successfully, but failed to deploy the service',
      errors: null,
    });
    const list = await h.request('GET', base(), { token: t.token });
    const kept = list.body.data.services.find(
      (s: { docker_image?: string }) => s.docker_image === 'refuse/me',
    );
    assert.ok(kept, 'the service still exists');
    assert.equal(res.headers['x-berth-service-id'], kept.id);
    assert.equal(kept.state, 'deploy_failed');
    assert.equal(kept.latest_deployment.state, 'failed');
    assert.match(kept.latest_deployment.failure_reason, /refuse/);
    const deployment = await h.request('GET', `/v1/deployments/${kept.latest_deployment.id}`, {
      token: t.token,
    });
    assert.equal(deployment.body.data.deployment.state, 'failed');
    assert.equal(deployment.body.data.deployment.failure_reason, kept.latest_deployment.failure_reason);
  });
});

describe('delete', () => {
  test('202 accepted, then delete states to deleted; the service stays readable and leaves the list', async () => {
    const service = await createService({ ...VALID_SERVICE.docker, deploy_now: true });
    await serviceReaches(service.id, 'running');
    const res = await h.request('DELETE', `${base()}/${service.id}`, { token: t.token });
    assert.equal(res.status, 202);
    assert.deepEqual(res.body, { message: 'accepted' });
    const seen = new Set<string>();
    const data = await pollUntil('the service to be deleted', async () => {
      const d = await getService(service.id);
      seen.add(d.service.state);
      return d.service.state === 'deleted' ? d : undefined;
    });
    assert.ok(
      [...seen].every((s) => ['delete_pending', 'delete_queued', 'deleting', 'deleted'].includes(s)),
      [...seen].join(),
    );
    assert.equal(data.service.is_deleted, true);
    assert.equal(data.run_status, 'deleted');
    assert.equal(data.ready_count, 0);
    const list = await h.request('GET', base(), { token: t.token });
    assert.ok(!list.body.data.services.some((s: { id: string }) => s.id === service.id));
  });

  test('a protected service answers 409 and nothing is torn down', async () => {
    const service = await createService({ ...VALID_SERVICE.docker, is_protected: true });
    const res = await h.request('DELETE', `${base()}/${service.id}`, { token: t.token });
    assert.equal(res.status, 409);
    assert.deepEqual(res.body, {
      error_code: 'conflict',
      message: 'Cannot delete a protected service. Remove protection first.',
      errors: null,
    });
    assert.equal((await getService(service.id)).service.state, 'deploy_pending');
    const unprotect = await h.request('PATCH', `${base()}/${service.id}`, {
      token: t.token,
      body: { is_protected: false },
    });
    assert.equal(unprotect.status, 200);
    assert.equal((await h.request('DELETE', `${base()}/${service.id}`, { token: t.token })).status, 202);
  });

  test('every mutation of a service being deleted is 403 "Service is being deleted"', async () => {
    const service = await createService(VALID_SERVICE.docker);
    assert.equal((await h.request('DELETE', `${base()}/${service.id}`, { token: t.token })).status, 202);
    const forbidden = { error_code: 'forbidden', message: 'Service is being deleted', errors: null };
    const calls: [string, string, unknown][] = [
      ['POST', `${base()}/${service.id}/deploy`, {}],
      ['PATCH', `${base()}/${service.id}`, { replica_count: 3 }],
      ['PUT', `${base()}/${service.id}/secrets`, { secrets: [] }],
      ['DELETE', `${base()}/${service.id}`, undefined],
    ];
    for (const [method, url, body] of calls) {
      const res = await h.request(method, url, { token: t.token, body });
      assert.equal(res.status, 403, `${method} ${url}`);
      assert.deepEqual(res.body, forbidden);
    }
  });

  test('deployments not yet started are cancelled by a delete; the running one finishes first', async () => {
    const service = await createService(VALID_SERVICE.docker);
    const first = await deploy(service.id, { docker_image_tag: 'v1' });
    const second = await deploy(service.id, { docker_image_tag: 'v2' });
    assert.equal((await h.request('DELETE', `${base()}/${service.id}`, { token: t.token })).status, 202);
    await serviceReaches(service.id, 'deleted');
    const states = [await deploymentEnds(first), await deploymentEnds(second)].map((d) => d.state);
    assert.ok(
      states.every((s) => s === 'success' || s === 'failed'),
      states.join(),
    );
    assert.equal(states.includes('failed'), true, 'at least the queued one is cancelled');
  });
});

describe('secrets', () => {
  test('PUT then GET round trip, sorted by key; sensitive values are write-only and kept when omitted', async () => {
    const service = await createService(VALID_SERVICE.docker);
    const url = `${base()}/${service.id}/secrets`;
    const put = await h.request('PUT', url, {
      token: t.token,
      body: {
        secrets: [
          { key: 'ZED', value: 'z', description: 'last' },
          { key: 'API_KEY', value: 'hunter2', is_sensitive: true },
          { key: 'MODE', value: 'prod', use_preview: true },
        ],
      },
    });
    assert.equal(put.status, 200);
    assert.deepEqual(
      put.body.data.secrets.map((s: { key: string }) => s.key),
      ['API_KEY', 'MODE', 'ZED'],
    );
    assert.equal(put.body.data.secrets[0].value, undefined, 'sensitive value left out of the PUT response');
    assert.ok(put.body.data.secrets.every((s: { updated_at: string }) => /Z$/.test(s.updated_at)));

    const got = await h.request('GET', url, { token: t.token });
    assert.deepEqual(got.body.data.secrets, put.body.data.secrets);
    assert.ok(!got.raw.includes('hunter2'));

    // Read-modify-write: send back what was read (no value for the sensitive key) plus a change.
    const rmw = got.body.data.secrets.map((s: { key: string }) =>
      s.key === 'MODE' ? { ...s, value: 'staging' } : s,
    );
    assert.equal((await h.request('PUT', url, { token: t.token, body: { secrets: rmw } })).status, 200);
    const stored = await h.deps.store.db
      .selectFrom('secrets')
      .selectAll()
      .where('scope_id', '=', service.id)
      .execute();
    const apiKey = stored.find((s) => s.key === 'API_KEY');
    assert.equal(
      apiKey && h.deps.secretBox.open(apiKey.value_sealed),
      'hunter2',
      'the sensitive value survived',
    );

    // Full replace: a key left out is removed.
    const replaced = await h.request('PUT', url, {
      token: t.token,
      body: { secrets: [{ key: 'ONLY', value: '1' }] },
    });
    assert.deepEqual(
      replaced.body.data.secrets.map((s: { key: string }) => s.key),
      ['ONLY'],
    );
  });

  test('a rejected PUT (one bad entry among good ones) leaves the stored set unchanged', async () => {
    const service = await createService(VALID_SERVICE.docker);
    const url = `${base()}/${service.id}/secrets`;
    await h.request('PUT', url, { token: t.token, body: { secrets: [{ key: 'KEEP', value: 'me' }] } });
    const before = await h.request('GET', url, { token: t.token });

    const blank = await h.request('PUT', url, {
      token: t.token,
      body: {
        secrets: [
          { key: 'NEW', value: 'a' },
          { key: '   ', value: 'b' },
        ],
      },
    });
    assert.equal(blank.status, 422);
    assert.equal(blank.body.errors[0].field, 'secrets[1].key');

    const duplicate = await h.request('PUT', url, {
      token: t.token,
      body: {
        secrets: [
          { key: 'DUP', value: 'a' },
          { key: 'OTHER', value: 'b' },
          { key: ' DUP ', value: 'c' },
        ],
      },
    });
    assert.equal(duplicate.status, 422);
    assert.equal(duplicate.body.error_code, 'validation');
    assert.equal(duplicate.body.message, 'Duplicate secret key: DUP');

    const wrongType = await h.request('PUT', url, {
      token: t.token,
      body: { secrets: [{ key: 'X', value: 5 }] },
    });
    assert.equal(wrongType.status, 422);
    assert.equal(wrongType.body.errors[0].field, 'secrets[0].value');

    assert.deepEqual((await h.request('GET', url, { token: t.token })).body, before.body);
  });

  test('a sensitive entry without value needs a stored sensitive value to keep, else nothing is written', async () => {
    const service = await createService(VALID_SERVICE.docker);
    const url = `${base()}/${service.id}/secrets`;
    const put = (secrets: unknown[]) => h.request('PUT', url, { token: t.token, body: { secrets } });
    assert.equal(
      (
        await put([
          { key: 'PLAIN', value: 'shown' },
          { key: 'HIDDEN', value: 'h', is_sensitive: true },
        ])
      ).status,
      200,
    );
    const before = await h.request('GET', url, { token: t.token });
    // A misspelt key, and a plain value being made sensitive: each would be an empty value nobody can read.
    const res = await put([
      { key: 'HIDDEN', is_sensitive: true },
      { key: 'HIDEN', is_sensitive: true },
      { key: 'PLAIN', is_sensitive: true },
    ]);
    assert.equal(res.status, 422, res.raw);
    assert.deepEqual(res.body.errors, [
      {
        field: 'secrets[1].value',
        error: 'secrets[1].value is required for a sensitive secret: HIDEN has no stored value to keep',
      },
      {
        field: 'secrets[2].value',
        error:
          'secrets[2].value is required for a sensitive secret: PLAIN is stored as not sensitive, so there is no hidden value to keep',
      },
    ]);
    assert.deepEqual((await h.request('GET', url, { token: t.token })).body, before.body);
    const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: t.token,
      body: { ...VALID_SERVICE.docker, secrets: [{ key: 'NEW', is_sensitive: true }] },
    });
    assert.equal(created.status, 422, created.raw);
    assert.equal(created.body.errors[0].field, 'secrets[0].value');
  });

  test('environment secrets are shared; a service key wins; both are written to the provider', async () => {
    const envUrl = `/v1/environments/${t.envId}/secrets`;
    const empty = await h.request('GET', envUrl, { token: t.token });
    assert.deepEqual(empty.body.data.secrets, []);
    assert.equal(
      (
        await h.request('PUT', envUrl, {
          token: t.token,
          body: {
            secrets: [
              { key: 'SHARED', value: 'env' },
              { key: 'LEVEL', value: 'env' },
            ],
          },
        })
      ).status,
      200,
    );
    const service = await createService({
      ...VALID_SERVICE.docker,
      secrets: [{ key: 'LEVEL', value: 'service' }],
    });
    const { effectiveSecrets } = await import('../../src/domain/usecases/secrets.ts');
    assert.deepEqual(await effectiveSecrets(h.deps.store.db, h.deps.secretBox, t.envId, service.id), {
      SHARED: 'env',
      LEVEL: 'service',
    });
    const calls = await pollUntil('both secret writes to reach the provider', async () => {
      const calls = await simTables(h.deps.store.db)
        .selectFrom('sim_calls')
        .select(['subject_id', 'service_id'])
        .where('operation', '=', 'write_secrets')
        .where('subject_id', 'in', [t.envId, service.id])
        .where('outcome', 'is not', null)
        .execute();
      return new Set(calls.map((c) => c.subject_id)).size === 2 ? calls : undefined;
    });
    // Each write reached the provider with its own scope (the sim records a service scope's id only).
    for (const call of calls) {
      assert.equal(call.service_id, call.subject_id === service.id ? service.id : null, call.subject_id);
    }
  });
});

describe('previews', () => {
  const previewParent = { ...VALID_SERVICE.github, enable_previews: true };

  test('creates a preview service for a pull request, then reuses it', async () => {
    const parent = await createService({
      ...previewParent,
      secrets: [
        { key: 'SHOWN', value: '1', use_preview: true },
        { key: 'HIDDEN', value: '2' },
      ],
    });
    const body = { preview: true, commit_id: 'f00dbabe', branch: 'feature/x', pr_number: 7, note: 'PR 7' };
    const first = await h.request('POST', `${base()}/${parent.id}/deploy`, { token: t.token, body });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const data = first.body.data;
    assert.equal(data.is_new, true);
    assert.equal(data.pr_number, 7);
    assert.equal(data.service_name, 'Git App (PR#7)');
    assert.equal(data.deployment_id, undefined);
    assert.match(data.origin, new RegExp(`^https://pr-7-${parent.subdomain}\\.`));

    const preview = await serviceReaches(data.service_id, 'running');
    assert.equal(preview.service.is_preview, true);
    assert.equal(preview.service.parent_service_id, parent.id);
    assert.equal(preview.service.git_repo_branch, 'feature/x');
    assert.equal(preview.service.auto_deploy, true);
    assert.equal(preview.service.latest_deployment.git_commit_ref, 'f00dbabe');
    const secrets = await h.request('GET', `${base()}/${data.service_id}/secrets`, { token: t.token });
    assert.deepEqual(
      secrets.body.data.secrets.map((s: { key: string }) => s.key),
      ['SHOWN'],
    );

    const again = await h.request('POST', `${base()}/${parent.id}/deploy`, {
      token: t.token,
      body: { ...body, commit_id: 'cafe' },
    });
    assert.equal(again.body.data.is_new, false);
    assert.equal(again.body.data.service_id, data.service_id);
  });

  test('preview rules: required fields, a github web parent with previews enabled, and the plan feature', async () => {
    const parent = await createService(previewParent);
    const missing = await h.request('POST', `${base()}/${parent.id}/deploy`, {
      token: t.token,
      body: { preview: true },
    });
    assert.equal(missing.status, 422);
    assert.deepEqual(
      missing.body.errors.map((e: { field: string }) => e.field),
      ['commit_id', 'branch', 'pr_number'],
    );
    const notEnabled = await createService(VALID_SERVICE.github);
    const res = await h.request('POST', `${base()}/${notEnabled.id}/deploy`, {
      token: t.token,
      body: { preview: true, commit_id: 'a', branch: 'b', pr_number: 1 },
    });
    assert.equal(res.status, 422);
    assert.equal(res.body.errors[0].field, 'preview');
    // Every rule the parent breaks, in the one error of its field.
    const docker = await createService(VALID_SERVICE.docker);
    const both = await h.request('POST', `${base()}/${docker.id}/deploy`, {
      token: t.token,
      body: { preview: true, commit_id: 'a', branch: 'b', pr_number: 1 },
    });
    assert.equal(both.status, 422, both.raw);
    assert.deepEqual(both.body.errors, [
      {
        field: 'preview',
        error:
          'previews need a service whose source is github; previews are not enabled on this service (set enable_previews)',
      },
    ]);

    const starter = await h.tenant({ plan: 'starter' });
    const starterParent = await createService(previewParent, starter);
    const forbidden = await h.request(
      'POST',
      `/v1/environments/${starter.envId}/services/${starterParent.id}/deploy`,
      {
        token: starter.token,
        body: { preview: true, commit_id: 'a', branch: 'b', pr_number: 1 },
      },
    );
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.body.error_code, 'forbidden');
  });
});

describe('audit', () => {
  test('each accepted mutation writes one entry with actor API Token and the request id; secrets never appear', async () => {
    const before = (await h.request('GET', '/v1/audit-logs?limit=100', { token: t.token })).body.data
      .audit_logs.length;
    const service = await createService({
      ...VALID_SERVICE.docker,
      deploy_now: true,
      secrets: [{ key: 'S', value: 'audit-secret-value' }],
    });
    await h.request('PUT', `${base()}/${service.id}/secrets`, {
      token: t.token,
      body: { secrets: [{ key: 'S', value: 'audit-secret-value' }] },
      headers: { 'x-request-id': 'audit-check-1' },
    });
    const logs = await h.request('GET', '/v1/audit-logs?limit=100', { token: t.token });
    assert.equal(logs.body.data.audit_logs.length, before + 2);
    const [latest, previous] = logs.body.data.audit_logs;
    assert.equal(latest.action, 'service.secrets.replace');
    assert.equal(latest.request_id, 'audit-check-1');
    assert.equal(latest.actor, 'API Token');
    assert.equal(latest.token_id, t.tokenId);
    assert.equal(previous.action, 'service.create');
    assert.ok(!logs.raw.includes('audit-secret-value'));
  });
});
