import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { deployHandler } from '../../src/jobs/handlers/deploy.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { claimHeldByTest } from '../helpers/jobs.ts';

/** Behaviours found in review: states that must not lie, replaces that must stay whole, errors together. */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

const services = () => `/v1/environments/${t.envId}/services`;

async function create(body: Record<string, unknown>) {
  const res = await h.request('POST', services(), { token: t.token, body });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.service as { id: string; state: string; name: string };
}

test('shape errors and rule errors of one create come together, in the order of the spec table', async () => {
  const res = await h.request('POST', services(), {
    token: t.token,
    body: { name: 'ab1', source: 'github', port: 0, replica_count: 'two' },
  });
  assert.equal(res.status, 422);
  assert.deepEqual(
    res.body.errors.map((e: { field: string }) => e.field),
    [
      'name',
      'port',
      'replica_count',
      'cpu_count_min',
      'memory_mb_min',
      'git_repo_full_name',
      'git_repo_branch',
    ],
  );
  assert.equal(
    res.body.errors[2].error,
    'replica_count must be an integer',
    'the shape error wins over "required"',
  );
});

test('type may be null (the spec types it "string or null"), on create and to clear it on PATCH', async () => {
  const created = await create({ ...VALID_SERVICE.docker, type: null, port: null });
  assert.equal(
    (await h.request('GET', `${services()}/${created.id}`, { token: t.token })).body.data.service.type,
    null,
  );
  const typed = await create(VALID_SERVICE.gitlab);
  const cleared = await h.request('PATCH', `${services()}/${typed.id}`, {
    token: t.token,
    body: { type: null },
  });
  assert.equal(cleared.status, 200, cleared.raw);
  assert.equal(cleared.body.data.service.type, null);
});

test('an empty ops_json is no ops_json, whatever the source', async () => {
  const res = await h.request('POST', services(), {
    token: t.token,
    body: { ...VALID_SERVICE.github, ops_json: '' },
  });
  assert.equal(res.status, 200, res.raw);
  assert.equal(res.body.data.service.ops_json, undefined);
});

test('the create response says deploy_pending even with deploy_now', async () => {
  const created = await create({ ...VALID_SERVICE.docker, deploy_now: true });
  assert.equal(created.state, 'deploy_pending');
  const read = await h.request('GET', `${services()}/${created.id}`, { token: t.token });
  assert.equal(read.body.data.state, 'deploy_queued', 'the deployment itself was queued');
});

test('an older deployment finishing does not report the service running while a newer one waits', async () => {
  const created = await create(VALID_SERVICE.docker);
  const deploy = async (tag: string) =>
    (
      await h.request('POST', `${services()}/${created.id}/deploy`, {
        token: t.token,
        body: { docker_image_tag: tag },
      })
    ).body.data.deployment_id as string;
  const first = await deploy('v1');
  await deploy('v2');
  // Run only the first deployment's job, as a worker would, while the second still waits.
  const job = await h.deps.store.db
    .selectFrom('jobs')
    .selectAll()
    .where('subject_id', '=', first)
    .executeTakeFirstOrThrow();
  await deployHandler(h.deps).run(job, new AbortController().signal, claimHeldByTest);
  const read = await h.request('GET', `${services()}/${created.id}`, { token: t.token });
  assert.equal(read.body.data.service.latest_deployment.state, 'queued');
  assert.equal(read.body.data.state, 'deploy_queued');
  assert.equal(
    (await h.request('GET', `/v1/deployments/${first}`, { token: t.token })).body.data.deployment.state,
    'success',
  );
});

test('a preview service can be patched (its generated name is not re-checked)', async () => {
  const parent = await create({ ...VALID_SERVICE.github, enable_previews: true });
  const preview = await h.request('POST', `${services()}/${parent.id}/deploy`, {
    token: t.token,
    body: { preview: true, commit_id: 'abc', branch: 'feature', pr_number: 3 },
  });
  const res = await h.request('PATCH', `${services()}/${preview.body.data.service_id}`, {
    token: t.token,
    body: { replica_count: 2 },
  });
  assert.equal(res.status, 200, res.raw);
  assert.equal(res.body.data.service.name, `${parent.name} (PR#3)`);
  const renamed = await h.request('PATCH', `${services()}/${preview.body.data.service_id}`, {
    token: t.token,
    body: { name: 'Bad (name)' },
  });
  assert.equal(renamed.status, 422, 'a name the caller sends is still checked');
});

test('the previews plan check comes before field validation', async () => {
  const starter = await h.tenant({ plan: 'starter' });
  const parent = await h.request('POST', `/v1/environments/${starter.envId}/services`, {
    token: starter.token,
    body: { ...VALID_SERVICE.github, enable_previews: true },
  });
  const res = await h.request(
    'POST',
    `/v1/environments/${starter.envId}/services/${parent.body.data.service.id}/deploy`,
    {
      token: starter.token,
      body: { preview: true, pr_number: 0 },
    },
  );
  assert.equal(res.status, 403);
  assert.equal(res.body.error_code, 'forbidden');
});

test('two secrets replaces at once: each is whole, the result is one of them, never a mix', async () => {
  const created = await create(VALID_SERVICE.docker);
  const url = `${services()}/${created.id}/secrets`;
  for (let round = 0; round < 5; round++) {
    const [a, b] = await Promise.all([
      h.request('PUT', url, {
        token: t.token,
        body: {
          secrets: [
            { key: `A_${round}`, value: 'a' },
            { key: 'SAME', value: 'a' },
          ],
        },
      }),
      h.request('PUT', url, {
        token: t.token,
        body: {
          secrets: [
            { key: `B_${round}`, value: 'b' },
            { key: 'SAME', value: 'b' },
          ],
        },
      }),
    ]);
    assert.equal(a.status, 200, a.raw);
    assert.equal(b.status, 200, b.raw);
    const keys = (await h.request('GET', url, { token: t.token })).body.data.secrets.map(
      (s: { key: string }) => s.key,
    );
    assert.ok(
      JSON.stringify(keys) === JSON.stringify([`A_${round}`, 'SAME']) ||
        JSON.stringify(keys) === JSON.stringify([`B_${round}`, 'SAME']),
      `round ${round}: ${keys.join(',')}`,
    );
  }
});

test('a deploy handler whose worker lost the lease records no outcome (the new holder will)', async () => {
  const created = await create(VALID_SERVICE.docker);
  const res = await h.request('POST', `${services()}/${created.id}/deploy`, {
    token: t.token,
    body: { docker_image_tag: 'v9' },
  });
  const id = res.body.data.deployment_id as string;
  const job = await h.deps.store.db
    .selectFrom('jobs')
    .selectAll()
    .where('subject_id', '=', id)
    .executeTakeFirstOrThrow();
  const lost = new AbortController();
  lost.abort(new Error('the lease of this job was lost'));
  await deployHandler(h.deps).run(job, lost.signal, claimHeldByTest);
  const d = (await h.request('GET', `/v1/deployments/${id}`, { token: t.token })).body.data.deployment;
  assert.equal(d.state, 'in_progress', 'left for the worker that holds the job now');
  const read = await h.request('GET', `${services()}/${created.id}`, { token: t.token });
  assert.equal(read.body.data.state, 'deploying');
});
