import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { simTables } from '../../src/providers/sim/tables.ts';
import { captureVariables } from '../helpers/deployments.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { HOSTED_EXAMPLE } from '../helpers/ops-json-examples.ts';
import { pollUntil } from '../helpers/poll.ts';

/** ops.json dependencies made by deployments on the simulated cloud, and the dependencies read. */
let h: Harness;
let t: Tenant;
let region: string;
/** The variables each deployment handed the provider, by deployment id. */
let applied: Map<string, Record<string, string>>;
before(async () => {
  h = await startHarness();
  applied = captureVariables(h);
  await h.startWorker();
  t = await h.tenant();
  const env = await h.request('GET', `/v1/environments/${t.envId}`, { token: t.token });
  region = env.body.data.environment.region;
});
after(() => h.close());

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies
type Json = Record<string, any>;
const servicesUrl = () => `/v1/environments/${t.envId}/services`;

async function createService(ops: unknown): Promise<string> {
  const res = await h.request('POST', servicesUrl(), {
    token: t.token,
    body: { ...VALID_SERVICE.docker, ops_json: JSON.stringify(ops) },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.service.id;
}

async function setOps(serviceId: string, ops: unknown) {
  const res = await h.request('PATCH', `${servicesUrl()}/${serviceId}`, {
    token: t.token,
    body: { ops_json: JSON.stringify(ops) },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
}

async function deployed(serviceId: string): Promise<Json> {
  const res = await h.request('POST', `${servicesUrl()}/${serviceId}/deploy`, { token: t.token, body: {} });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const id = res.body.data.deployment_id as string;
  return pollUntil(`deployment ${id} to end`, async () => {
    const d = (await h.request('GET', `/v1/deployments/${id}`, { token: t.token })).body.data.deployment;
    return d.state === 'success' || d.state === 'failed' ? d : undefined;
  });
}

async function dependencies(serviceId: string): Promise<Json[]> {
  const res = await h.request('GET', `${servicesUrl()}/${serviceId}/dependencies`, { token: t.token });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.dependencies;
}

async function calls(serviceId: string, operation: string): Promise<string[]> {
  const rows = await simTables(h.deps.store.db)
    .selectFrom('sim_calls')
    .select('outcome')
    .where('service_id', '=', serviceId)
    .where('operation', '=', operation)
    .orderBy('id')
    .execute();
  return rows.map((r) => r.outcome ?? '');
}

describe('dependencies on the simulated cloud', () => {
  let serviceId: string;
  let first: Json[];

  test("issue 11's example: every resource is made once before the service starts, which gets resolved values", async () => {
    serviceId = await createService(HOSTED_EXAMPLE);
    const deployment = await deployed(serviceId);
    assert.equal(deployment.state, 'success', deployment.failure_reason);
    const variables = applied.get(deployment.id) ?? {};
    const exported = [
      'BUCKET_NAME',
      'BUCKET_ARN',
      'TOPIC',
      'QUEUE',
      'DB_HOST',
      'DB_ENDPOINT',
      'DB_USER',
      'DB_PASSWORD_ARN',
      'DB_NAME',
      'DB_ARN',
      'REDIS_ENDPOINT',
      'REDIS_PORT',
    ];
    for (const name of exported) {
      assert.ok(variables[name], `${name} is set`);
      assert.ok(!variables[name]?.startsWith('$'), `${name} is resolved, not ${variables[name]}`);
    }
    assert.match(variables.BUCKET_NAME ?? '', /^attachments-[0-9a-f]{8}$/);
    assert.equal(variables.BUCKET_ARN, `arn:aws:s3:::${variables.BUCKET_NAME}`);
    assert.match(variables.TOPIC ?? '', new RegExp(`^arn:aws:sns:${region}:\\d{12}:[a-z0-9-]+$`));
    assert.match(
      variables.DB_HOST ?? '',
      new RegExp(`^userdata-[0-9a-f]{8}\\..+\\.${region}\\.rds\\.amazonaws\\.com$`),
    );
    assert.equal(variables.DB_ENDPOINT, `${variables.DB_HOST}:5432`);
    assert.match(variables.DB_ARN ?? '', new RegExp(`^arn:aws:rds:${region}:\\d{12}:db:userdata-`));
    assert.match(variables.DB_PASSWORD_ARN ?? '', new RegExp(`^arn:aws:secretsmanager:${region}:`));
    assert.match(variables.REDIS_ENDPOINT ?? '', /^sessions-[0-9a-f]{8}\..*cache\.amazonaws\.com:6379$/);
    assert.equal(variables.REDIS_PORT, '6379');

    first = await dependencies(serviceId);
    assert.deepEqual(first.map((d) => `${d.kind}.${d.type}:${d.id}:${d.state}`).sort(), [
      'elasticache.clusters:cache:available',
      'rds.instances:main-db:available',
      's3.buckets:attachments:available',
      'sns.topics:...:available',
      'sqs.queues:...:available',
    ]);
    for (const d of first) {
      assert.ok(Date.parse(d.provisioned_at) <= Date.now(), 'provisioned_at is a time');
      assert.equal(d.error, '');
      assert.ok(!('password' in d.attributes), 'never a password');
    }
    const rds = first.find((d) => d.kind === 'rds');
    assert.equal(rds?.attributes.address, variables.DB_HOST);
    assert.equal(rds?.prefix, 'userdata');
    assert.equal((await calls(serviceId, 'create_resource')).length, 5);
  });

  test('the operator reads a password back by its $passwordArn (admin API), audited on the account; nobody else can', async () => {
    const arn = first.find((d) => d.kind === 'rds')?.attributes.passwordArn as string;
    const url = `/dependency-passwords?arn=${encodeURIComponent(arn)}`;
    const read = await h.admin('GET', url);
    assert.equal(read.status, 200, JSON.stringify(read.body));
    const [made] = await simTables(h.deps.store.db)
      .selectFrom('sim_resources')
      .select('password')
      .where('service_id', '=', serviceId)
      .where('kind', '=', 'rds')
      .execute();
    assert.deepEqual(read.body.data, { arn, password: made?.password });
    const audit = await h.request('GET', '/v1/audit-logs', { token: t.token });
    const entry = audit.body.data.audit_logs.find((e: Json) => e.action === 'dependency_password.read');
    assert.deepEqual(
      {
        actor: entry?.actor,
        resource_type: entry?.resource_type,
        resource_id: entry?.resource_id,
        environment_id: entry?.environment_id,
      },
      { actor: 'Operator', resource_type: 'service', resource_id: serviceId, environment_id: t.envId },
    );
    assert.equal(
      (await h.admin('GET', `/dependency-passwords?arn=${encodeURIComponent(`${arn}x`)}`)).status,
      404,
    );
    const asAccount = await h.request('GET', `/admin/v1${url}`, { token: t.token });
    assert.equal(asAccount.status, 401);
  });

  test('a redeploy makes nothing again: same attributes, no new calls', async () => {
    const deployment = await deployed(serviceId);
    assert.equal(deployment.state, 'success', deployment.failure_reason);
    assert.deepEqual(await dependencies(serviceId), first);
    assert.equal((await calls(serviceId, 'create_resource')).length, 5);
    assert.deepEqual(await calls(serviceId, 'update_resource'), []);
  });

  test('changed properties update in place; a removed id is deleted; a changed prefix replaces the resource', async () => {
    const ops = structuredClone(HOSTED_EXAMPLE) as Json;
    ops.dependencies.rds.instances[0].storage_gb = 20;
    delete ops.dependencies.s3;
    ops.dependencies.elasticache.clusters[0].prefix = 'sessions-two';
    await setOps(serviceId, ops);
    const deployment = await deployed(serviceId);
    assert.equal(deployment.state, 'success', deployment.failure_reason);
    assert.deepEqual(await calls(serviceId, 'update_resource'), ['rds.instances main-db']);
    assert.deepEqual((await calls(serviceId, 'delete_resource')).sort(), [
      'elasticache.clusters cache',
      's3.buckets attachments',
    ]);
    const now = await dependencies(serviceId);
    assert.equal(
      now.find((d) => d.kind === 's3'),
      undefined,
    );
    const rds = now.find((d) => d.kind === 'rds');
    const firstRds = first.find((d) => d.kind === 'rds');
    assert.deepEqual(rds?.attributes, firstRds?.attributes, 'an update keeps the name and endpoint');
    assert.equal(rds?.provisioned_at, firstRds?.provisioned_at);
    const cache = now.find((d) => d.kind === 'elasticache');
    assert.match(cache?.attributes.name, /^sessions-two-/);
    assert.equal(applied.get(deployment.id)?.BUCKET_NAME, undefined);
  });

  test('deleting the service deletes every resource it had', async () => {
    const res = await h.request('DELETE', `${servicesUrl()}/${serviceId}`, { token: t.token });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await pollUntil('the service to be deleted', async () => {
      const rows = await h.deps.store.db
        .selectFrom('services')
        .select('state')
        .where('id', '=', serviceId)
        .executeTakeFirst();
      return rows?.state === 'deleted' ? true : undefined;
    });
    const left = await simTables(h.deps.store.db)
      .selectFrom('sim_resources')
      .select('resource_id')
      .where('service_id', '=', serviceId)
      .execute();
    assert.deepEqual(left, []);
    const rows = await h.deps.store.db
      .selectFrom('service_resources')
      .select('resource_id')
      .where('service_id', '=', serviceId)
      .execute();
    assert.deepEqual(rows, []);
  });
});

describe('dependencies that cannot be made', () => {
  test("a resource that fails fails the deployment with the resource's error, before the service starts", async () => {
    const serviceId = await createService({
      dependencies: { rds: { instances: [{ id: 'db', prefix: 'fail-db' }] } },
    });
    const deployment = await deployed(serviceId);
    assert.equal(deployment.state, 'failed');
    assert.match(
      deployment.failure_reason,
      /rds instances db could not be made: simulated failure: .*fail-db/,
    );
    assert.equal(applied.has(deployment.id), false, 'the service was never applied');
    const [db] = await dependencies(serviceId);
    assert.equal(db?.state, 'failed');
    assert.match(db?.error, /fail-db/);
  });

  test('an unknown kind is accepted on the file and fails the deployment naming it', async () => {
    const serviceId = await createService({
      dependencies: { 'gcp:cloudsql': { instances: [{ id: 'sql' }] } },
    });
    const deployment = await deployed(serviceId);
    assert.equal(deployment.state, 'failed');
    assert.match(deployment.failure_reason, /gcp:cloudsql instances sql .*cannot provision gcp:cloudsql/);
  });

  test('preview_only resources are not made for a service that is not a preview', async () => {
    const serviceId = await createService({
      dependencies: {
        s3: {
          buckets: [
            { id: 'pr', preview_only: true },
            { id: 'main', skip_preview: true },
          ],
        },
      },
    });
    const deployment = await deployed(serviceId);
    assert.equal(deployment.state, 'success', deployment.failure_reason);
    assert.deepEqual(
      (await dependencies(serviceId)).map((d) => d.id),
      ['main'],
    );
  });
});

describe('cron.cron_jobs on the simulated cloud', () => {
  test('each tick of a short schedule requests the path on the service internal address (recorded)', async () => {
    const serviceId = await createService({
      cron: { cron_jobs: [{ schedule: '* * * * * *', path: '/api/v1/sync' }] },
    });
    const deployment = await deployed(serviceId);
    assert.equal(deployment.state, 'success', deployment.failure_reason);
    const got = await h.request('GET', `${servicesUrl()}/${serviceId}`, { token: t.token });
    const alias = got.body.data.svc_alias;
    assert.ok(alias);
    const serving = h.deps.provider.serving;
    assert.ok(serving, 'the simulated cloud serves cron requests');
    await serving.start();
    try {
      const requests = await pollUntil('two ticks', async () => {
        const made = await calls(serviceId, 'cron_request');
        return made.length >= 2 ? made : undefined;
      });
      for (const request of requests) assert.equal(request, `GET http://${alias}:8080/api/v1/sync`);
    } finally {
      await serving.stop();
    }
  });
});

describe('a provider that cannot make dependencies', () => {
  test('fails a deployment that declares any, naming the resource, and never passes a $ token on', async () => {
    const provider = h.deps.provider as { resources?: unknown };
    const resources = provider.resources;
    provider.resources = undefined;
    try {
      const serviceId = await createService({
        dependencies: { sqs: { queues: [{ id: 'jobs', exports: { QUEUE: '$name' } }] } },
      });
      const deployment = await deployed(serviceId);
      assert.equal(deployment.state, 'failed');
      assert.equal(
        deployment.failure_reason,
        'The dependency sqs queues jobs could not be made: this provider cannot provision dependencies (sqs queues jobs)',
      );
      assert.equal(applied.has(deployment.id), false);
    } finally {
      provider.resources = resources;
    }
  });
});
