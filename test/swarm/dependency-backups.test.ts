import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { demultiplex } from '../../src/providers/engine/output.ts';
import { buildDependencyImages } from '../helpers/dependency-images.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, dependenciesOf, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';
import { startSwarm, type TestSwarm } from '../helpers/swarm.ts';

/**
 * Issue 30's dependency backups on a real 2-node swarm: the dependencies' tasks run wherever they were
 * pinned and their passwords are swarm secrets, yet rows in a Postgres and a MariaDB dependency and keys
 * in a Redis one are backed up (from the manager, over the environment's overlay), changed, restored and read back
 * as they were; the service using them is scaled down for the restore and back after; Redis keeps the
 * restored data over a restart of its task; a restore into a new one makes a copy holding the backup.
 */
const server = serverFixture('swarm');
let swarm: TestSwarm;
let berth: BerthProcess & { url: string };
let token: string;
let envUrl: string;
let envId: string;
let backupDir: string;
let clientImage: string;
const ADMIN_TOKEN = randomUUID();

before(
  async () => {
    swarm = await startSwarm(2);
    await buildDependencyImages();
    const images: Record<string, string> = {};
    for (const kind of ['postgres', 'mariadb', 'redis'])
      images[kind] = await swarm.pushLocalImage(`berth-deps/${kind}:latest`, `berth-deps/${kind}`);
    clientImage = images.postgres as string;
    await server.ready();
    backupDir = path.join(server.database.dataDir, 'dependency-backups');
    ({ berth, token, envId, envUrl } = await server.start({
      DOCKER_HOST: swarm.dockerHost,
      BERTH_ADMIN_TOKEN: ADMIN_TOKEN,
      BERTH_SWARM_MONITOR_S: '1',
      BERTH_DOCKER_POSTGRES_IMAGE: images.postgres as string,
      BERTH_DOCKER_MARIADB_IMAGE: images.mariadb as string,
      BERTH_DOCKER_REDIS_IMAGE: images.redis as string,
      BERTH_DEPENDENCY_BACKUP_DIR: backupDir,
      // Backups here are asked for: the schedule would add its own.
      BERTH_DEPENDENCY_BACKUP_INTERVAL_HOURS: '0',
    }));
  },
  { timeout: 1_800_000 },
);
after(() => swarm?.down());

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies
type Json = Record<string, any>;

/**
 * Runs a shell command in a container of the postgres image (it has every client) on node 2's Engine,
 * attached to the environment's overlay: the dependencies answer there as to a service.
 */
async function sh(command: string, env: string[] = []): Promise<string> {
  const engine = swarm.node(2);
  const present = await engine
    .getImage(clientImage)
    .inspect()
    .then(() => true)
    .catch(() => false);
  if (!present) {
    await new Promise<void>((resolve, reject) =>
      engine.pull(clientImage, (error: Error | null, stream: NodeJS.ReadableStream) =>
        error ? reject(error) : engine.modem.followProgress(stream, (e) => (e ? reject(e) : resolve())),
      ),
    );
  }
  const container = await engine.createContainer({
    Image: clientImage,
    Cmd: ['/bin/sh', '-c', command],
    Env: env,
    HostConfig: { NetworkMode: `berth-env-${envId}` },
  });
  try {
    await container.start();
    const { StatusCode } = await container.wait();
    const output = demultiplex(await container.logs({ stdout: true, stderr: true }));
    assert.equal(StatusCode, 0, `${command}: ${output}`);
    return output.trim();
  } finally {
    await container.remove({ force: true });
  }
}

test('postgres, mariadb and redis on the swarm: back up, change, restore, read the original back; a copy for inspection', async () => {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Backed Up',
    source: 'docker_image',
    docker_registry: swarm.registry,
    docker_image: 'berth-deps/postgres',
    type: 'worker',
    run_command: 'sleep 100000',
    replica_count: 1,
    cpu_count_min: 0.1,
    memory_mb_min: 32,
    ops_json: JSON.stringify({
      dependencies: {
        rds: {
          instances: [
            { id: 'pg', prefix: 'pgdata', engine: 'postgres', exports: { PG: '$endpoint' } },
            { id: 'maria', prefix: 'mariadata', engine: 'mariadb', exports: { MY: '$endpoint' } },
          ],
        },
        elasticache: { clusters: [{ id: 'cache', prefix: 'kv', exports: { REDIS: '$endpoint' } }] },
      },
    }),
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const serviceId = created.body.data.service.id as string;
  const deploy = await api(`${envUrl}/services/${serviceId}/deploy`, token, 'POST', {});
  assert.equal(deploy.status, 200, JSON.stringify(deploy.body));
  const deployed = await deploymentEnd(berth.url, token, deploy.body.data.deployment_id, 900_000);
  assert.equal(deployed.state, 'success', deployed.failure_reason);

  const dependencies = await dependenciesOf(envUrl, token, serviceId);
  const attributes = (id: string) =>
    dependencies.find((d) => d.id === id)?.attributes as Record<string, string>;
  const pg = attributes('pg');
  const maria = attributes('maria');
  const cache = attributes('cache');
  const passwordOf = async (of: Record<string, string>) => {
    const arn = encodeURIComponent(of.passwordArn ?? '');
    const read = await api(`${berth.url}/admin/v1/dependency-passwords?arn=${arn}`, ADMIN_TOKEN);
    assert.equal(read.status, 200, JSON.stringify(read.body));
    return read.body.data.password as string;
  };
  const pgEnv = [`PGPASSWORD=${await passwordOf(pg)}`];
  const myEnv = [`MYSQL_PWD=${await passwordOf(maria)}`];
  const psqlAt = (at: Record<string, string>, q: string) =>
    sh(`psql -At -h ${at.address} -U ${at.username} -d ${at.dbName} -c "${q}"`, pgEnv);
  const psql = (q: string) => psqlAt(pg, q);
  const mysql = (q: string) =>
    sh(`mariadb -N -h ${maria.address} -u ${maria.username} ${maria.dbName} -e "${q}"`, myEnv);
  const redis = (args: string) => sh(`redis-cli -h ${cache.address} ${args}`);

  await psql("CREATE TABLE notes (v text); INSERT INTO notes VALUES ('original-1'), ('original-2')");
  await mysql("CREATE TABLE notes (v varchar(40)); INSERT INTO notes VALUES ('original-1'), ('original-2')");
  await redis('set greeting original');
  await redis('rpush list a b c');

  const backupsUrl = (id: string) => `${envUrl}/services/${serviceId}/dependencies/${id}/backups`;
  const backupOf = async (id: string, backupId: string, done: (b: Json) => boolean): Promise<Json> =>
    pollUntil(
      `backup ${backupId} of ${id}`,
      async () => {
        const list = await api(backupsUrl(id), token);
        const b = list.body.data.backups.find((x: Json) => x.id === backupId);
        return b && done(b) ? b : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 250 },
    );
  const taken: Record<string, Json> = {};
  for (const id of ['pg', 'maria', 'cache']) {
    const res = await api(backupsUrl(id), token, 'POST', {});
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const backup = await backupOf(
      id,
      res.body.data.backup.id,
      (b) => b.state !== 'pending' && b.state !== 'running',
    );
    assert.equal(backup.state, 'completed', backup.error);
    assert.ok(backup.size_bytes > 0);
    taken[id] = backup;
  }
  // The dumps are on Berth's machine, complete; no helper is left on the manager.
  const files = await readdir(path.join(backupDir, envId), { recursive: true });
  assert.ok(!files.some((f) => f.endsWith('.partial')), files.join(', '));
  assert.ok(
    files.some((f) => f.endsWith(`${taken.pg?.id}.sql`)),
    files.join(', '),
  );
  assert.ok(
    files.some((f) => f.endsWith(`${taken.cache?.id}.rdb`)),
    files.join(', '),
  );
  assert.deepEqual(
    await swarm.manager.listContainers({ all: true, filters: { label: ['berth.role=backup'] } }),
    [],
  );

  await psql("UPDATE notes SET v = 'changed'; INSERT INTO notes VALUES ('added')");
  await mysql("UPDATE notes SET v = 'changed'; INSERT INTO notes VALUES ('added')");
  await redis('set greeting changed');
  await redis('set added yes');
  await redis('del list');

  const serving = `berth-${serviceId}`;
  for (const id of ['pg', 'maria', 'cache']) {
    const url = `${backupsUrl(id)}/${taken[id]?.id}/restore`;
    const refused = await api(url, token, 'POST', {});
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    const res = await api(url, token, 'POST', { force: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.data.backup.restore.stopped_services, [serviceId]);
    // The service is scaled to no replicas for the restore, its count kept in a label.
    const scaled = await pollUntil('the service to be scaled down', async () => {
      const spec = (await swarm.manager.getService(serving).inspect()).Spec;
      return spec.Mode.Replicated.Replicas === 0 ? spec : undefined;
    });
    assert.equal(scaled.Labels['berth.restore-replicas'], '1');
    const done = await backupOf(id, taken[id]?.id, (b) => ['completed', 'failed'].includes(b.restore?.state));
    assert.equal(done.restore.state, 'completed', done.restore.error);
  }

  assert.equal(await psql('SELECT v FROM notes ORDER BY v'), 'original-1\noriginal-2');
  assert.equal(await mysql('SELECT v FROM notes ORDER BY v'), 'original-1\noriginal-2');
  assert.equal(await redis('get greeting'), 'original');
  assert.equal(await redis('lrange list 0 -1'), 'a\nb\nc');
  assert.equal(await redis('exists added'), '0');
  // A primary again, and the restored data is in its append-only file: it outlives a new task.
  assert.match(await redis('info replication'), /role:master/);
  await redis('set after-restore yes');
  const cacheService = await swarm.manager.getService(`berth-dep-${cache.address}`).inspect();
  await swarm.manager.getService(cacheService.ID).update({
    ...cacheService.Spec,
    TaskTemplate: { ...cacheService.Spec.TaskTemplate, ForceUpdate: 1 },
    version: cacheService.Version.Index,
  });
  await pollUntil(
    'a new redis task',
    async () => {
      const tasks = await swarm.manager.listTasks({ filters: { service: [cacheService.ID] } });
      return tasks.some((t: Json) => t.Spec.ForceUpdate === 1 && t.Status.State === 'running')
        ? true
        : undefined;
    },
    { timeoutMs: 120_000 },
  );
  assert.equal(
    await pollUntil('redis to answer again', () => redis('get greeting').catch(() => undefined)),
    'original',
  );
  assert.equal(await redis('get after-restore'), 'yes');

  // The service runs again with the replicas it had, the label gone.
  await pollUntil('the service to run again', async () => {
    const spec = (await swarm.manager.getService(serving).inspect()).Spec;
    const tasks = await swarm.manager.listTasks({
      filters: { service: [serving], 'desired-state': ['running'] },
    });
    return spec.Mode.Replicated.Replicas === 1 &&
      !spec.Labels['berth.restore-replicas'] &&
      tasks.some((t: Json) => t.Status.State === 'running')
      ? true
      : undefined;
  });

  // Into a new one: a copy (its own swarm service) holds the backup's data; the dependency keeps its own.
  await psql("UPDATE notes SET v = 'changed-again'");
  const intoNew = await api(`${backupsUrl('pg')}/${taken.pg?.id}/restore`, token, 'POST', { into: 'new' });
  assert.equal(intoNew.status, 200, JSON.stringify(intoNew.body));
  assert.deepEqual(intoNew.body.data.backup.restore.stopped_services, []);
  const copied = await backupOf('pg', taken.pg?.id, (b) =>
    ['completed', 'failed'].includes(b.restore?.state),
  );
  assert.equal(copied.restore.state, 'completed', copied.restore.error);
  const copy = copied.restore.attributes as Record<string, string>;
  assert.equal(copy.address, `${pg.address}-restore`);
  assert.equal(await psqlAt(copy, 'SELECT v FROM notes ORDER BY v'), 'original-1\noriginal-2');
  assert.equal(await psql('SELECT DISTINCT v FROM notes'), 'changed-again');

  // Deleting the service deletes the copy with the dependency.
  assert.equal((await api(`${envUrl}/services/${serviceId}`, token, 'DELETE')).status, 202);
  await pollUntil(
    'the service to be deleted',
    async () =>
      (await api(`${envUrl}/services/${serviceId}`, token)).body.data.state === 'deleted' ? true : undefined,
    { timeoutMs: 180_000 },
  );
  assert.deepEqual(
    await swarm.manager.listServices({ filters: { label: [`berth.dependency-of=${serviceId}`] } }),
    [],
  );
});
