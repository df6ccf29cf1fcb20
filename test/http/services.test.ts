import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setEnvironmentState } from '../../src/store/repositories/environments.ts';
import { recordObservation } from '../../src/store/repositories/observations.ts';
import { type Harness, type Reply, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { HOSTED_EXAMPLE_DEPENDENCIES, HOSTED_EXAMPLES } from '../helpers/ops-json-examples.ts';
import { pollUntil } from '../helpers/poll.ts';

/** GET one service (hydrated), the service list (newest first, paginated) and PATCH. */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 5000 });
  t = await h.tenant();
});
after(() => h.close());

type Body = Record<string, unknown>;
// biome-ignore lint/suspicious/noExplicitAny: services are JSON of many optional fields
type Service = Record<string, any>;
interface FieldError {
  field: string;
  error: string;
}

const docker = (over: Body = {}): Body => ({ ...VALID_SERVICE.docker, ...over });
const github = (over: Body = {}): Body => ({ ...VALID_SERVICE.github, ...over });
const gitlab = (over: Body = {}): Body => ({ ...VALID_SERVICE.gitlab, ...over });
const helm = (over: Body = {}): Body => ({ ...VALID_SERVICE.helm, ...over });

const servicesUrl = (tenant: Tenant = t) => `/v1/environments/${tenant.envId}/services`;
const serviceUrl = (id: string, tenant: Tenant = t) => `${servicesUrl(tenant)}/${id}`;

async function create(body: Body, tenant: Tenant = t): Promise<Service> {
  const res = await h.request('POST', servicesUrl(tenant), { token: tenant.token, body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.service;
}

function get(id: string, tenant: Tenant = t): Promise<Reply> {
  return h.request('GET', serviceUrl(id, tenant), { token: tenant.token });
}

function patch(id: string, body: unknown, tenant: Tenant = t): Promise<Reply> {
  return h.request('PATCH', serviceUrl(id, tenant), { token: tenant.token, body });
}

function list(query: string, tenant: Tenant = t): Promise<Reply> {
  return h.request('GET', `${servicesUrl(tenant)}${query}`, { token: tenant.token });
}

function assertFieldErrors(res: Reply, fields: string[]): FieldError[] {
  assert.equal(res.status, 422, JSON.stringify(res.body));
  assert.equal(res.body.error_code, 'validation');
  assert.equal(res.body.message, 'Invalid data');
  const errors = res.body.errors as FieldError[];
  assert.deepEqual(errors.map((e) => e.field).sort(), [...fields].sort());
  for (const e of errors) assert.ok(e.error.includes(e.field), `"${e.error}" names ${e.field}`);
  return errors;
}

async function auditsOf(tenant: Tenant, resourceId: string) {
  const res = await h.request('GET', '/v1/audit-logs?limit=100', { token: tenant.token });
  assert.equal(res.status, 200);
  return (res.body.data.audit_logs as { action: string; resource_id: string }[]).filter(
    (a) => a.resource_id === resourceId,
  );
}

/** Every page of the list with this page size, checking each page's size along the way. */
async function walk(tenant: Tenant, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 1000; pages++) {
    const query: string = `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res = await list(query, tenant);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const page = res.body.data.services as Service[];
    assert.ok(page.length <= limit, 'a page holds at most limit services');
    ids.push(...page.map((s) => s.id as string));
    cursor = res.body.data.next_cursor;
    if (cursor === null) return ids;
    assert.equal(page.length, limit, 'only the last page is short');
  }
  throw new Error('the cursor never ended');
}

describe('GET one service', () => {
  test('hydrated before any deploy: live status, no alias yet, no namespace, no whitelist, no dependencies', async () => {
    const created = await create(docker());
    const res = await get(created.id);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.message, 'success');
    const { service, state, run_status, ready_count, svc_alias } = res.body.data;
    assert.equal(service.id, created.id);
    assert.equal(typeof service.run_status, 'string');
    assert.notEqual(service.run_status, 'running');
    assert.equal(service.ready_count, 0);
    assert.equal(
      service.kube_svc_alias,
      undefined,
      'unset fields are omitted (spec); data.svc_alias says ""',
    );
    assert.equal('namespace_name' in service, false, 'namespace_name omitted until provisioned');
    assert.equal('ip_whitelist' in service, false, 'ip_whitelist omitted when unrestricted');
    assert.deepEqual(service.ops_dependencies, []);
    assert.equal(service.latest_deployment, null);
    // The narrow projection at the top of data, for pollers of the hosted API.
    assert.equal(state, 'deploy_pending');
    assert.equal(state, service.state);
    assert.equal(run_status, service.run_status);
    assert.equal(ready_count, service.ready_count);
    assert.equal(svc_alias, '');
    // Everything the create response said is still there.
    for (const [key, value] of Object.entries(created)) assert.deepEqual(service[key], value, key);
  });

  test('ip_whitelist comes from the ops_json ingress settings', async () => {
    const created = await create(
      docker({ ops_json: JSON.stringify({ ingress: { ip_whitelist: ['203.0.113.0/24'] } }) }),
    );
    const res = await get(created.id);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.data.service.ip_whitelist, ['203.0.113.0/24']);
    assert.deepEqual(res.body.data.service.ops_dependencies, []);
  });

  test('ops_dependencies are reported as {id, kind, exports}, with open kinds and $ tokens unresolved', async () => {
    const dependencies = {
      'gcp:cloudsql': {
        instances: [
          { id: 'main-db', tier: 'f1', exports: { DATABASE_HOST: '$host', DATABASE_PORT: '$port' } },
        ],
      },
      s3: { buckets: [{ id: 'uploads', prefix: 'up', exports: { BUCKET: '$name' } }] },
      'azure:cosmosdb': { accounts: [{ id: 'brand-new' }] },
    };
    const created = await create(docker({ ops_json: JSON.stringify({ dependencies }) }));
    const res = await get(created.id);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.data.service.ops_dependencies, [
      { id: 'main-db', kind: 'gcp:cloudsql', exports: { DATABASE_HOST: '$host', DATABASE_PORT: '$port' } },
      { id: 'uploads', kind: 's3', exports: { BUCKET: '$name' } },
      { id: 'brand-new', kind: 'azure:cosmosdb', exports: {} },
    ]);
    assert.equal('ip_whitelist' in res.body.data.service, false);
  });

  for (const { what, document } of HOSTED_EXAMPLES) {
    test(`issue 11's ops.json example is accepted on create and on PATCH, as written: ${what}`, async () => {
      const text = JSON.stringify(document);
      const created = await create(docker({ ops_json: text }));
      assert.equal(created.ops_json, text);
      const plain = await create(docker());
      const patched = await patch(plain.id, { ops_json: text });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      for (const id of [created.id, plain.id]) {
        const res = await get(id);
        assert.equal(res.body.data.service.ops_json, text);
        const expected = HOSTED_EXAMPLE_DEPENDENCIES.filter((d) =>
          Object.keys((document.dependencies as object | undefined) ?? {}).includes(d.kind),
        );
        assert.deepEqual(res.body.data.service.ops_dependencies, expected);
      }
    });
  }

  test('the old array form of dependencies is refused on create and PATCH, saying what to write instead', async () => {
    const old = JSON.stringify({ dependencies: [{ id: 'db', kind: 'rds', exports: { DB: '$db.url' } }] });
    const refused = await h.request('POST', servicesUrl(), {
      token: t.token,
      body: docker({ ops_json: old }),
    });
    const [error] = assertFieldErrors(refused, ['ops_json.dependencies']);
    assert.match(error?.error ?? '', /\{"s3": \{"buckets": \[/);
    const plain = await create(docker());
    assertFieldErrors(await patch(plain.id, { ops_json: old }), ['ops_json.dependencies']);
  });

  test('cron.cron_jobs only on web and internal services: a field error otherwise, also when PATCH changes the type', async () => {
    const cron = JSON.stringify({ cron: { cron_jobs: [{ schedule: '*/2 * * * *', path: '/sync' }] } });
    const worker = docker({ type: 'worker', port: undefined, ops_json: cron });
    const refused = await h.request('POST', servicesUrl(), { token: t.token, body: worker });
    const [error] = assertFieldErrors(refused, ['ops_json.cron.cron_jobs']);
    assert.match(error?.error ?? '', /only web and internal services .*worker/);
    await create(docker({ type: 'internal', ops_json: cron }));
    const web = await create(docker({ ops_json: cron }));
    assertFieldErrors(await patch(web.id, { type: 'worker' }), ['ops_json.cron.cron_jobs']);
  });

  test('a service that does not exist, or belongs to another account, is 404 Service not found', async () => {
    const other = await h.tenant();
    const theirs = await create(docker(), other);
    for (const url of [serviceUrl(randomUUID()), `${servicesUrl()}/${theirs.id}`]) {
      const res = await h.request('GET', url, { token: t.token });
      assert.equal(res.status, 404, url);
      assert.deepEqual(res.body, { error_code: 'notfound', message: 'Service not found', errors: null });
    }
    // Another account's environment in the path is an environment not found.
    const res = await h.request('GET', serviceUrl(theirs.id, other), { token: t.token });
    assert.equal(res.status, 404);
    assert.equal(res.body.message, 'Environment not found');
  });

  test('a service of another environment of the same account is 404 through this one', async () => {
    const env = await h.admin('POST', `/accounts/${t.accountId}/environments`, { name: 'second' });
    assert.equal(env.status, 200);
    const second = { ...t, envId: env.body.data.environment.id as string };
    await setEnvironmentState(h.deps.store.db, second.envId, 'available');
    const there = await create(docker(), second);
    const res = await get(there.id);
    assert.equal(res.status, 404);
    assert.equal(res.body.message, 'Service not found');
    assert.equal((await get(there.id, second)).status, 200);
  });
});

describe('GET the service list', () => {
  test('newest first; list items carry no get-only fields', async () => {
    const tenant = await h.tenant();
    const ids: string[] = [];
    for (const name of ['First', 'Second', 'Third', 'Fourth'])
      ids.push((await create(docker({ name }), tenant)).id);
    const res = await list('', tenant);
    assert.equal(res.status, 200);
    assert.equal(res.body.message, 'success');
    assert.equal(res.body.data.next_cursor, null);
    const services = res.body.data.services as Service[];
    assert.deepEqual(
      services.map((s) => s.id),
      [...ids].reverse(),
    );
    assert.deepEqual(
      services.map((s) => s.name),
      ['Fourth', 'Third', 'Second', 'First'],
    );
    for (const s of services) {
      assert.equal(s.private_instance_id, tenant.envId);
      for (const field of ['kube_svc_alias', 'namespace_name', 'ops_dependencies'])
        assert.equal(field in s, false, `${field} not on list items`);
    }
  });

  test('list items carry the observed run status and ready replicas, as GET service does', async () => {
    const tenant = await h.tenant();
    const serving = await create(docker({ name: 'Serving' }), tenant);
    const fresh = await create(docker({ name: 'Fresh' }), tenant);
    await recordObservation(h.deps.store.db, serving.id, { run_status: 'running', ready_count: 2 });
    const services = (await list('', tenant)).body.data.services as Service[];
    assert.deepEqual(
      services.map((s) => [s.name, s.run_status, s.ready_count]),
      [
        ['Fresh', 'not_deployed', 0],
        ['Serving', 'running', 2],
      ],
    );
    for (const s of [serving, fresh]) {
      const one = (await get(s.id, tenant)).body.data.service;
      const listed = services.find((l) => l.id === s.id);
      assert.deepEqual([listed?.run_status, listed?.ready_count], [one.run_status, one.ready_count]);
    }
  });

  test('an empty environment lists no services', async () => {
    const tenant = await h.tenant();
    const res = await list('', tenant);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.data, { services: [], next_cursor: null });
  });

  test('limit and cursor walk every service exactly once, in the same order as one big page', async () => {
    const tenant = await h.tenant();
    for (let i = 0; i < 7; i++) await create(docker({ name: `Serial ${'x'.repeat(i + 1)}` }), tenant);
    // Created concurrently, some share a created_at: the cursor must still not skip or repeat.
    await Promise.all(
      Array.from({ length: 6 }, (_, i) => create(docker({ name: `Parallel ${'y'.repeat(i + 1)}` }), tenant)),
    );
    const all = await list('?limit=100', tenant);
    assert.equal(all.status, 200);
    const expected = (all.body.data.services as Service[]).map((s) => s.id as string);
    assert.equal(expected.length, 13);
    assert.equal(new Set(expected).size, 13);
    for (const limit of [1, 2, 5, 13, 50]) {
      const ids = await walk(tenant, limit);
      assert.deepEqual(ids, expected, `limit ${limit}`);
    }
    // Without a limit the default (50) holds them all.
    const defaults = await list('', tenant);
    assert.equal(defaults.body.data.services.length, 13);
    assert.equal(defaults.body.data.next_cursor, null);
  });

  test('limit 0, 101 or not a number is 422 field limit', async () => {
    for (const limit of ['0', '101', '-1', 'ten', '1.5']) {
      const res = await list(`?limit=${limit}`);
      assertFieldErrors(res, ['limit']);
    }
    assert.equal((await list('?limit=1')).status, 200);
    assert.equal((await list('?limit=100')).status, 200);
  });

  const b64 = (text: string) => Buffer.from(text).toString('base64url');
  async function assertBadCursor(cursor: string) {
    const res = await list(`?limit=5&cursor=${encodeURIComponent(cursor)}`);
    assert.equal(res.status, 422, `${cursor}: ${JSON.stringify(res.body)}`);
    assertFieldErrors(res, ['cursor']);
  }

  test('a cursor that is not a next_cursor of this endpoint is 422 field cursor', async () => {
    for (const cursor of ['not-a-cursor', b64('garbage'), b64('2024-01-01T00:00:00.000Z'), 'x'.repeat(201)])
      await assertBadCursor(cursor);
  });

  test('a tampered cursor that decodes to "date|id" but holds no real timestamp or UUID is 422 field cursor', async () => {
    // Date.parse accepts "1", and "-" * 36 passes a loose id check; neither is a value the endpoint hands out.
    await assertBadCursor(b64(`1|${randomUUID()}`));
    await assertBadCursor(b64('2024-01-01T00:00:00.000Z|------------------------------------'));
  });

  test("another account's environment is 404", async () => {
    const other = await h.tenant();
    const res = await h.request('GET', servicesUrl(other), { token: t.token });
    assert.equal(res.status, 404);
    assert.equal(res.body.message, 'Environment not found');
  });
});

describe('PATCH a service', () => {
  test('a subset changes only those fields, persists, and writes one audit entry service.update', async () => {
    const before = await create(docker({ memory_mb_max: 1024 }));
    const res = await patch(before.id, { replica_count: 5, cpu_count_max: 2 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.message, 'success');
    const after = res.body.data.service as Service;
    assert.equal(after.replica_count, 5);
    assert.equal(after.cpu_count_max, 2);
    const untouched = Object.keys(before).filter(
      (k) => !['replica_count', 'cpu_count_max', 'updated_at'].includes(k),
    );
    for (const key of untouched) assert.deepEqual(after[key], before[key], key);
    assert.equal(Object.keys(after).length, Object.keys(before).length + 1, 'only cpu_count_max was added');
    assert.ok(after.updated_at >= before.updated_at);
    const got = await get(before.id);
    assert.equal(got.body.data.service.replica_count, 5);
    assert.equal(got.body.data.service.cpu_count_max, 2);
    assert.equal(got.body.data.service.memory_mb_max, 1024);

    const audits = await auditsOf(t, before.id);
    assert.deepEqual(audits.map((a) => a.action).sort(), ['service.create', 'service.update']);
    const update = audits.find((a) => a.action === 'service.update') as unknown as Record<string, unknown>;
    assert.equal(update.actor, 'API Token');
    assert.equal(update.token_id, t.tokenId);
    assert.equal(update.resource_type, 'service');
    assert.equal(update.environment_id, t.envId);
  });

  test('an empty patch changes nothing', async () => {
    const before = await create(github());
    const res = await patch(before.id, {});
    assert.equal(res.status, 200, JSON.stringify(res.body));
    for (const key of Object.keys(before).filter((k) => k !== 'updated_at'))
      assert.deepEqual(res.body.data.service[key], before[key], key);
  });

  test('names may contain hyphens on patch, but not digits or underscores', async () => {
    const s = await create(docker());
    const ok = await patch(s.id, { name: 'My-Web-App' });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.data.service.name, 'My-Web-App');
    assert.equal(ok.body.data.service.subdomain, s.subdomain, 'the subdomain does not follow a rename');
    for (const name of ['App 2', 'My_App', 'Ab', 'A'.repeat(51)])
      assertFieldErrors(await patch(s.id, { name }), ['name']);
    assert.equal((await get(s.id)).body.data.service.name, 'My-Web-App');
  });

  test('the merged result must pass the create rules', async () => {
    const worker = await create(gitlab());
    assertFieldErrors(await patch(worker.id, { type: 'web' }), ['port']);
    assertFieldErrors(await patch(worker.id, { type: 'internal' }), ['port']);
    assertFieldErrors(await patch(worker.id, { type: 'cron' }), ['cron_schedule']);
    assertFieldErrors(await patch(worker.id, { cpu_count_max: 0.5 }), ['cpu_count_max']); // min is 1
    assertFieldErrors(await patch(worker.id, { memory_mb_max: 128 }), ['memory_mb_max']); // min is 512
    assertFieldErrors(await patch(worker.id, { cpu_count_min: 1e-10 }), ['cpu_count_min']); // below 0.01
    assertFieldErrors(await patch(worker.id, { enable_previews: true }), ['enable_previews']); // gitlab
    assertFieldErrors(await patch(worker.id, { docker_image: 'acme/web' }), ['docker_image']);
    assertFieldErrors(await patch(worker.id, { replica_count: null }), ['replica_count']);
    assertFieldErrors(await patch(worker.id, { git_repo_full_name: 'nope' }), ['git_repo_full_name']);
    const web = await patch(worker.id, { type: 'web', port: 8080 });
    assert.equal(web.status, 200, JSON.stringify(web.body));
    assert.equal(web.body.data.service.type, 'web');
    assert.equal(web.body.data.service.port, 8080);
    assertFieldErrors(await patch(worker.id, { port: null }), ['port']);
  });

  test('shape rules apply on patch', async () => {
    const s = await create(docker());
    assertFieldErrors(await patch(s.id, { port: 0 }), ['port']);
    assertFieldErrors(await patch(s.id, { port: '80' }), ['port']);
    assertFieldErrors(await patch(s.id, { type: 'daemon' }), ['type']);
    assertFieldErrors(await patch(s.id, { replica_count: -1 }), ['replica_count']);
    assertFieldErrors(await patch(s.id, { is_protected: 'yes' }), ['is_protected']);
    assertFieldErrors(await patch(s.id, { docker_image: 'a'.repeat(101) }), ['docker_image']);
    assertFieldErrors(await patch(s.id, { source: 'svn' }), ['source']);
    assertFieldErrors(await patch(s.id, { port: 0, replica_count: -1 }), ['port', 'replica_count']);
  });

  test('auto_deploy true is rejected on a job; a job patched without auto_deploy is fine', async () => {
    const job = await create(github({ type: 'job' }));
    assertFieldErrors(await patch(job.id, { auto_deploy: true }), ['auto_deploy']);
    const res = await patch(job.id, { replica_count: 3 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.service.replica_count, 3);
    const web = await create(github({ auto_deploy: true }));
    assertFieldErrors(await patch(web.id, { type: 'job' }), ['auto_deploy']);
  });

  test('changing source to docker_image without docker_image in the same request is 422 docker_image', async () => {
    const s = await create(github());
    const res = await patch(s.id, { source: 'docker_image' });
    assert.equal(res.status, 422);
    assert.ok(
      (res.body.errors as FieldError[]).some((e) => e.field === 'docker_image'),
      JSON.stringify(res.body),
    );
    assert.equal((await get(s.id)).body.data.service.source, 'github', 'nothing changed');
  });

  test('changing source to docker_image with docker_image: 200, and the git fields are cleared', async () => {
    const s = await create(
      github({
        installation_id: await h.gitConnection(t, 'github'),
        auto_deploy: true,
        dockerfile_path: 'Dockerfile',
        build_context: 'app',
        ops_json_path: 'ops.json',
        enable_previews: true,
        enable_code_review: true,
        run_command: 'npm start',
      }),
    );
    const res = await patch(s.id, { source: 'docker_image', docker_image: 'acme/web' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const after = res.body.data.service as Service;
    assert.equal(after.source, 'docker_image');
    assert.equal(after.docker_image, 'acme/web');
    for (const field of [
      'git_repo_full_name',
      'git_repo_branch',
      'auto_deploy',
      'dockerfile_path',
      'build_context',
      'ops_json_path',
      'gitlab_connection_id',
    ])
      assert.equal(field in after, false, `${field} cleared`);
    assert.equal(after.enable_previews, false);
    assert.equal(after.enable_code_review, false);
    // Fields that are not tied to the old source carry over.
    assert.equal(after.run_command, 'npm start');
    assert.equal(after.replica_count, s.replica_count);
    assert.equal(after.cpu_count_min, s.cpu_count_min);
    assert.equal(after.memory_mb_min, s.memory_mb_min);
    assert.equal(after.port, s.port);
    const got = (await get(s.id)).body.data.service;
    assert.equal(got.source, 'docker_image');
    assert.equal('git_repo_full_name' in got, false);
  });

  test('changing source from helm_chart requires the new source fields and the resources', async () => {
    const s = await create(helm({ helm_values_yml: 'a: 1\n' }));
    assertFieldErrors(await patch(s.id, { source: 'docker_image' }), [
      'replica_count',
      'cpu_count_min',
      'memory_mb_min',
      'docker_image',
    ]);
    const res = await patch(s.id, {
      source: 'docker_image',
      docker_image: 'acme/worker',
      replica_count: 1,
      cpu_count_min: 0.25,
      memory_mb_min: 128,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    for (const field of ['helm_chart_repo', 'helm_chart_name', 'helm_values_yml'])
      assert.equal(field in res.body.data.service, false, `${field} cleared`);
  });

  test('changing source to github requires git_repo_full_name and git_repo_branch in the same request', async () => {
    const s = await create(docker({ docker_registry: 'registry.example.com', run_command: 'serve' }));
    const missing = await patch(s.id, { source: 'github' });
    assert.equal(missing.status, 422);
    const fields = (missing.body.errors as FieldError[]).map((e) => e.field);
    assert.ok(fields.includes('git_repo_full_name') && fields.includes('git_repo_branch'), fields.join());
    assert.equal((await get(s.id)).body.data.service.source, 'docker_image', 'nothing changed');
    const res = await patch(s.id, {
      source: 'github',
      git_repo_full_name: 'acme/web',
      git_repo_branch: 'main',
      replica_count: s.replica_count,
      cpu_count_min: s.cpu_count_min,
      memory_mb_min: s.memory_mb_min,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const after = res.body.data.service as Service;
    assert.equal(after.source, 'github');
    assert.equal('docker_image' in after, false);
    assert.equal('docker_registry' in after, false);
    assert.equal(after.run_command, 'serve');
  });

  test('ops_json: 500 validation with a non-docker source, ops.json rules on docker_image', async () => {
    const git = await create(github());
    const res = await patch(git.id, { ops_json: '{}' });
    assert.equal(res.status, 500, JSON.stringify(res.body));
    assert.deepEqual(res.body, {
      error_code: 'validation',
      message: 'Ops Json is only supported for docker image source',
      errors: null,
    });
    const d = await create(docker());
    assertFieldErrors(await patch(d.id, { ops_json: JSON.stringify({ deploy_timeout: 21 }) }), [
      'ops_json.deploy_timeout',
    ]);
    const ok = await patch(d.id, {
      ops_json: JSON.stringify({ ingress: { ip_whitelist: ['198.51.100.7/32'] } }),
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual((await get(d.id)).body.data.service.ip_whitelist, ['198.51.100.7/32']);
  });

  test('build_context, dockerfile_path and ops_json_path are trimmed on patch; blank build_context unsets', async () => {
    const s = await create(github({ build_context: 'app' }));
    const res = await patch(s.id, { dockerfile_path: ' Dockerfile.prod ', ops_json_path: ' ops.json\n' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.service.dockerfile_path, 'Dockerfile.prod');
    assert.equal(res.body.data.service.ops_json_path, 'ops.json');
    assert.equal(res.body.data.service.build_context, 'app');
    const blank = await patch(s.id, { build_context: '   ' });
    assert.equal(blank.status, 200, JSON.stringify(blank.body));
    assert.equal('build_context' in blank.body.data.service, false);
  });

  test('deploy_now and secrets are not patch fields: refused, nothing deployed or stored; subdomain is read-only', async () => {
    const s = await create(docker());
    const res = await patch(s.id, {
      deploy_now: true,
      secrets: [{ key: 'SHOULD_NOT', value: 'be stored' }],
      subdomain: 'mine',
      replica_count: 4,
    });
    assertFieldErrors(res, ['deploy_now', 'secrets']);
    const got = await get(s.id);
    assert.equal(got.body.data.state, 'deploy_pending');
    assert.equal(got.body.data.service.replica_count, 2);
    assert.equal(got.body.data.service.latest_deployment, null);
    const secrets = await h.request('GET', `${serviceUrl(s.id)}/secrets`, { token: t.token });
    assert.equal(secrets.status, 200);
    assert.deepEqual(secrets.body.data.secrets, []);
    const actions = (await auditsOf(t, s.id)).map((a) => a.action).sort();
    assert.deepEqual(actions, ['service.create'], 'no update, secrets or deployment audit entry');

    const readOnly = await patch(s.id, { subdomain: 'mine', replica_count: 4 });
    assert.equal(readOnly.status, 200, JSON.stringify(readOnly.body));
    assert.equal(readOnly.body.data.service.replica_count, 4);
    assert.equal(readOnly.body.data.service.subdomain, s.subdomain);
  });

  test('a rejected patch changes nothing and writes no audit entry', async () => {
    const s = await create(docker());
    assert.equal((await patch(s.id, { type: 'web', port: null })).status, 422);
    assert.equal((await patch(s.id, { ops_json: 'nope' })).status, 422);
    assert.equal((await patch(s.id, { source: 'helm_chart' })).status, 422);
    const got = (await get(s.id)).body.data.service;
    assert.equal(got.port, 8080);
    assert.equal(got.source, 'docker_image');
    assert.equal(got.updated_at, s.updated_at);
    assert.deepEqual(
      (await auditsOf(t, s.id)).map((a) => a.action),
      ['service.create'],
    );
  });

  test('a bad body, or a service that does not exist, or a service being deleted', async () => {
    const s = await create(docker());
    const bad = await h.request('PATCH', serviceUrl(s.id), {
      token: t.token,
      rawBody: '[]',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(bad.status, 422);
    assert.deepEqual(bad.body, {
      error_code: 'validation',
      message: 'Please check your request body',
      errors: [{ field: 'body', error: 'body must be a JSON object' }],
    });
    const missing = await patch(randomUUID(), { replica_count: 1 });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.message, 'Service not found');

    const del = await h.request('DELETE', serviceUrl(s.id), { token: t.token });
    assert.equal(del.status, 202, JSON.stringify(del.body));
    const res = await patch(s.id, { replica_count: 1 });
    assert.equal(res.status, 403, JSON.stringify(res.body));
    assert.deepEqual(res.body, {
      error_code: 'forbidden',
      message: 'Service is being deleted',
      errors: null,
    });
  });
});

describe('with a worker: after a deploy and after a delete', () => {
  let w: Tenant;
  before(async () => {
    await h.startWorker();
    w = await h.tenant();
  });

  test('after a successful deploy, get hydrates namespace, alias, live status and the latest deployment', async () => {
    const s = await create(docker({ replica_count: 3 }), w);
    const deploy = await h.request('POST', `${serviceUrl(s.id, w)}/deploy`, { token: w.token, body: {} });
    assert.equal(deploy.status, 200, JSON.stringify(deploy.body));
    const deploymentId = deploy.body.data.deployment_id as string;
    await pollUntil('the deployment to succeed', async () => {
      const d = await h.request('GET', `/v1/deployments/${deploymentId}`, { token: w.token });
      assert.notEqual(d.body.data.deployment.state, 'failed');
      return d.body.data.deployment.state === 'success' ? true : undefined;
    });
    const res = await pollUntil('the service to run', async () => {
      const r = await get(s.id, w);
      return r.body.data.state === 'running' ? r : undefined;
    });
    const { service, state, run_status, ready_count, svc_alias } = res.body.data;
    assert.equal(state, 'running');
    assert.equal(service.state, 'running');
    assert.equal(run_status, 'running');
    assert.equal(service.run_status, 'running');
    assert.equal(ready_count, 3);
    assert.equal(service.ready_count, 3);
    assert.equal(typeof service.namespace_name, 'string');
    assert.ok(service.namespace_name.length > 0, 'namespace_name once provisioned');
    assert.ok(service.kube_svc_alias.length > 0, 'kube_svc_alias once provisioned');
    assert.equal(svc_alias, service.kube_svc_alias);
    assert.equal(service.latest_deployment.id, deploymentId);
    assert.equal(service.latest_deployment.state, 'success');
    // The list shows the latest deployment and the observed status too, but not the provisioning fields.
    const listed = ((await list('', w)).body.data.services as Service[]).find((x) => x.id === s.id);
    assert.equal(listed?.latest_deployment?.id, deploymentId);
    assert.deepEqual([listed?.run_status, listed?.ready_count], ['running', 3]);
    assert.equal(listed && 'namespace_name' in listed, false);
  });

  test('a deleted service leaves the list but stays readable', async () => {
    const keep = await create(docker({ name: 'Keep Me' }), w);
    const gone = await create(docker({ name: 'Delete Me' }), w);
    const del = await h.request('DELETE', serviceUrl(gone.id, w), { token: w.token });
    assert.equal(del.status, 202);
    const res = await pollUntil('the service to be deleted', async () => {
      const r = await get(gone.id, w);
      return r.body.data.state === 'deleted' ? r : undefined;
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.data.service.is_deleted, true);
    const ids = ((await list('', w)).body.data.services as Service[]).map((s) => s.id);
    assert.ok(ids.includes(keep.id));
    assert.equal(ids.includes(gone.id), false);
  });
});
