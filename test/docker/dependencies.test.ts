import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, test } from 'node:test';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import {
  buildDependencyImages,
  VISITOR_DEPENDENCIES as DEPENDENCIES,
  OUTSIDER,
  S3_VISIT,
  visitScript,
} from '../helpers/dependency-images.ts';
import { buildImage, docker } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import {
  api,
  type BerthProcess,
  type Dependency,
  dependenciesOf,
  deploymentEnd,
} from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Issue 11 on the docker provider: ops.json dependencies are containers of their own on the environment's
 * network (postgres, mariadb, redis, an s3 bucket), the service reaches them with only its exported
 * variables, their data outlives redeploys, and removing a dependency or the service removes its
 * container and volume. The service's image is made from the postgres dependency image.
 */
const ADMIN_TOKEN = randomUUID();
const server = serverFixture('docker', { BERTH_ADMIN_TOKEN: ADMIN_TOKEN });
let berth: BerthProcess & { url: string };
let token: string;
let envUrl: string;
let envId: string;

before(
  async () => {
    await buildDependencyImages();
    await buildImage(
      SERVICE_IMAGE,
      'FROM berth-deps/postgres:latest\nCOPY visit.sh s3-visit.cjs outsider.sh /\n',
      { 'visit.sh': visitScript({ mariadb: true }), 's3-visit.cjs': S3_VISIT, 'outsider.sh': OUTSIDER },
    );
    ({ berth, token, envId, envUrl } = await server.start());
  },
  { timeout: 1_800_000 },
);

const SERVICE_IMAGE = 'berth-test/deps-visitor:latest';

async function deployAndWait(serviceId: string) {
  const res = await api(`${envUrl}/services/${serviceId}/deploy`, token, 'POST', {});
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return deploymentEnd(berth.url, token, res.body.data.deployment_id, 600_000);
}

const byLabel = (label: string) => ({ filters: { label: [label] } });
async function containerOf(name: string) {
  return docker.getContainer(`berth-dep-${name}`).inspect();
}

/** Runs a command in a container of the postgres image on `network`; its exit code and output. */
async function probe(network: string, command: string): Promise<{ code: number; output: string }> {
  const container = await docker.createContainer({
    Image: 'berth-deps/postgres:latest',
    Cmd: ['/bin/sh', '-c', command],
    Labels: { 'berth.environment': envId },
    HostConfig: { NetworkMode: network },
  });
  try {
    await container.start();
    const { StatusCode } = await container.wait();
    const logs = await container.logs({ stdout: true, stderr: true });
    return { code: StatusCode, output: logs.toString('utf8') };
  } finally {
    await container.remove({ force: true });
  }
}

test('a service reaches its postgres, mariadb, redis and bucket by its exports; data outlives redeploys; removal deletes', async () => {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Visit Counter',
    source: 'docker_image',
    docker_image: 'berth-test/deps-visitor',
    type: 'job',
    run_command: 'sh /visit.sh 1',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 64,
    ops_json: JSON.stringify({ dependencies: DEPENDENCIES }),
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const id = created.body.data.service.id as string;

  const first = await deployAndWait(id);
  assert.equal(first.state, 'success', first.failure_reason);
  const deps = await dependenciesOf(envUrl, token, id);
  assert.deepEqual(deps.map((d) => `${d.kind} ${d.id} ${d.state}`).sort(), [
    'elasticache cache available',
    'rds legacy-db available',
    'rds main-db available',
    's3 attachments available',
  ]);
  const pg = deps.find((d) => d.id === 'main-db') as Dependency;
  assert.match(pg.attributes.address ?? '', /^userdata-[0-9a-f]{8}$/);
  assert.equal(pg.attributes.endpoint, `${pg.attributes.address}:5432`);
  assert.equal(pg.attributes.dbName, pg.attributes.address?.replace(/-/g, '_'));
  assert.match(
    pg.attributes.passwordArn ?? '',
    /^arn:berth:secretsmanager:.+:secret:userdata-[0-9a-f]{8}\/password$/,
  );
  assert.equal(JSON.stringify(deps).includes('"password"'), false, 'no password in the read');

  // The deployment's log has a step for the dependencies, naming each one.
  const logs = await api(`${berth.url}/v1/deployments/${first.id}/logs`, token);
  const lines = JSON.stringify(logs.body);
  for (const made of ['rds instances main-db', 'rds instances legacy-db', 'elasticache clusters cache'])
    assert.match(lines, new RegExp(`${made} is ready`), lines.slice(0, 2000));

  // The bucket, from outside with an S3 client and the exported key pair.
  const bucket = deps.find((d) => d.kind === 's3') as Dependency;
  const s3Container = await containerOf(bucket.attributes.name ?? '');
  const secret = s3Container.Config.Env.find((e) => e.startsWith('S3_SECRET_ACCESS_KEY='))?.split('=')[1];
  const ip = s3Container.NetworkSettings.Networks[`berth-env-${envId}`]?.IPAddress;
  const s3 = new S3Client({
    endpoint: `http://${ip}:4568`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: bucket.attributes.username ?? '', secretAccessKey: secret ?? '' },
  });
  await s3.send(new PutObjectCommand({ Bucket: bucket.attributes.name, Key: 'a.txt', Body: 'attached' }));
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket.attributes.name, Key: 'a.txt' }));
  assert.equal(await got.Body?.transformToString(), 'attached');

  // Reachable on the environment's network; from a service of another environment of the same account
  // no dependency answers, by its name or its address (outsider.sh: pg_isready exits 2, no response).
  const check = `pg_isready -h ${pg.attributes.address} -p 5432 -t 3`;
  assert.equal((await probe(`berth-env-${envId}`, check)).code, 0);
  const ipOf = async (name: string | undefined) =>
    (await containerOf(name ?? '')).NetworkSettings.Networks[`berth-env-${envId}`]?.IPAddress ?? '';
  const cacheAddress = (deps.find((d) => d.kind === 'elasticache') as Dependency).attributes.address;
  const targets = {
    PG_NAME: pg.attributes.address ?? '',
    PG_IP: await ipOf(pg.attributes.address),
    REDIS_NAME: cacheAddress ?? '',
    REDIS_IP: await ipOf(cacheAddress),
    S3_NAME: bucket.attributes.name ?? '',
    S3_IP: ip ?? '',
  };
  for (const [key, value] of Object.entries(targets)) assert.ok(value, `${key} is known`);
  const accounts = await api(`${berth.url}/admin/v1/accounts`, ADMIN_TOKEN);
  const other = await api(
    `${berth.url}/admin/v1/accounts/${accounts.body.data.accounts[0].id}/environments`,
    ADMIN_TOKEN,
    'POST',
    { name: 'Elsewhere' },
  );
  assert.equal(other.status, 200, JSON.stringify(other.body));
  const otherEnvId = other.body.data.environment.id as string;
  server.own(otherEnvId);
  const otherUrl = `${berth.url}/v1/environments/${otherEnvId}`;
  await pollUntil('the other environment to be available', async () =>
    (await api(otherUrl, token)).body.data.environment.state === 'available' ? true : undefined,
  );
  const outsider = await api(`${otherUrl}/services`, token, 'POST', {
    name: 'Outsider',
    source: 'docker_image',
    docker_image: 'berth-test/deps-visitor',
    type: 'job',
    run_command: 'sh /outsider.sh',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 64,
    secrets: Object.entries(targets).map(([key, value]) => ({ key, value })),
  });
  assert.equal(outsider.status, 200, JSON.stringify(outsider.body));
  const tried = await api(`${otherUrl}/services/${outsider.body.data.service.id}/deploy`, token, 'POST', {});
  const unreachable = await deploymentEnd(berth.url, token, tried.body.data.deployment_id, 120_000);
  assert.equal(
    unreachable.state,
    'success',
    `reached from another environment: ${unreachable.failure_reason}`,
  );

  // A redeploy finds every store as it was: each count is now 2.
  await api(`${envUrl}/services/${id}`, token, 'PATCH', { run_command: 'sh /visit.sh 2' });
  const second = await deployAndWait(id);
  assert.equal(second.state, 'success', second.failure_reason);
  const s3Again = await s3.send(new GetObjectCommand({ Bucket: bucket.attributes.name, Key: 'a.txt' }));
  assert.equal(await s3Again.Body?.transformToString(), 'attached');

  // Without the cache in ops.json, the next deployment deletes its container and volume.
  const cache = deps.find((d) => d.kind === 'elasticache') as Dependency;
  const { elasticache: _gone, ...withoutCache } = DEPENDENCIES;
  await api(`${envUrl}/services/${id}`, token, 'PATCH', {
    ops_json: JSON.stringify({ dependencies: withoutCache }),
    run_command: 'true',
  });
  const third = await deployAndWait(id);
  assert.equal(third.state, 'success', third.failure_reason);
  await assert.rejects(containerOf(cache.attributes.name ?? ''), /no such container/i);
  const volumes = await docker.listVolumes(byLabel(`berth.dependency-of=${id}`));
  assert.equal(volumes.Volumes.length, 3, 'the cache volume went, the others stay');

  // Deleting the service deletes every dependency: containers and volumes.
  assert.equal((await api(`${envUrl}/services/${id}`, token, 'DELETE')).status, 202);
  await pollUntil(
    'the service to be deleted',
    async () =>
      (await api(`${envUrl}/services/${id}`, token)).body.data.state === 'deleted' ? true : undefined,
    { timeoutMs: 120_000 },
  );
  assert.deepEqual(await docker.listContainers({ all: true, ...byLabel(`berth.dependency-of=${id}`) }), []);
  assert.deepEqual((await docker.listVolumes(byLabel(`berth.dependency-of=${id}`))).Volumes, []);
});

test('sns and sqs fail the deployment naming the kind: no local equivalent runs on docker', async () => {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Notifier',
    source: 'docker_image',
    docker_image: 'berth-deps/postgres',
    type: 'job',
    run_command: 'true',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 64,
    ops_json: JSON.stringify({
      dependencies: { sns: { topics: [{ id: 'events', prefix: 'events', exports: { TOPIC: '$arn' } }] } },
    }),
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const failed = await deployAndWait(created.body.data.service.id);
  assert.equal(failed.state, 'failed');
  assert.match(
    failed.failure_reason,
    /The dependency sns topics events could not be made: sns is not available on the docker provider/,
  );
});
