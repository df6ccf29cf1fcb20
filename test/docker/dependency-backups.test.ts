import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { before, test } from 'node:test';
import { demultiplex } from '../../src/providers/engine/output.ts';
import { buildDependencyImages } from '../helpers/dependency-images.ts';
import { docker } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, dependenciesOf, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Issue 30's done-means 3 on the docker provider: rows in a Postgres and a MariaDB dependency and keys in
 * a Redis one are backed up, changed, restored, and read back as they were; the service using them is
 * stopped for the restore and runs again after; retention keeps N.
 */
const ADMIN_TOKEN = randomUUID();
const server = serverFixture('docker', {
  BERTH_ADMIN_TOKEN: ADMIN_TOKEN,
  // Backups here are asked for: the schedule would add its own.
  BERTH_DEPENDENCY_BACKUP_INTERVAL_HOURS: '0',
});
let berth: BerthProcess & { url: string };
let token: string;
let envUrl: string;
let envId: string;
let backupDir: string;

before(
  async () => {
    await buildDependencyImages();
    await server.ready();
    backupDir = path.join(server.database.dataDir, 'dependency-backups');
    ({ berth, token, envId, envUrl } = await server.start({ BERTH_DEPENDENCY_BACKUP_DIR: backupDir }));
  },
  { timeout: 1_800_000 },
);

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies
type Json = Record<string, any>;

/** Runs a shell command in a container of the postgres image (it has every client) on the environment's network. */
async function sh(command: string, env: string[] = []): Promise<string> {
  const container = await docker.createContainer({
    Image: 'berth-deps/postgres:latest',
    Cmd: ['/bin/sh', '-c', command],
    Env: env,
    Labels: { 'berth.environment': envId },
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

/** The password a dependency container was made with. */
async function passwordOf(address: string, variable: string): Promise<string> {
  const info = await docker.getContainer(`berth-dep-${address}`).inspect();
  const entry = info.Config.Env.find((e) => e.startsWith(`${variable}=`)) as string;
  return entry.slice(variable.length + 1);
}

test('postgres, mariadb and redis: back up, change, restore, read the original back; retention keeps N', async () => {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Backed Up',
    source: 'docker_image',
    docker_image: 'berth-deps/postgres',
    type: 'worker',
    run_command: 'sleep 100000',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 64,
    ops_json: JSON.stringify({
      dependencies: {
        rds: {
          instances: [
            { id: 'pg', prefix: 'pgdata', engine: 'postgres', exports: { PG: '$endpoint' } },
            {
              id: 'maria',
              prefix: 'mariadata',
              engine: 'mariadb',
              backup_keep: 2,
              exports: { MY: '$endpoint' },
            },
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
  const pgEnv = [`PGPASSWORD=${await passwordOf(pg.address as string, 'POSTGRES_PASSWORD')}`];
  const myEnv = [`MYSQL_PWD=${await passwordOf(maria.address as string, 'MARIADB_PASSWORD')}`];
  const psql = (q: string) =>
    sh(`psql -At -h ${pg.address} -U ${pg.username} -d ${pg.dbName} -c "${q}"`, pgEnv);
  const mysql = (q: string) =>
    sh(`mariadb -N -h ${maria.address} -u ${maria.username} ${maria.dbName} -e "${q}"`, myEnv);
  const redis = (args: string) => sh(`redis-cli -h ${cache.address} ${args}`);

  await psql("CREATE TABLE notes (v text); INSERT INTO notes VALUES ('original-1'), ('original-2')");
  await mysql("CREATE TABLE notes (v varchar(40)); INSERT INTO notes VALUES ('original-1'), ('original-2')");
  await redis('set greeting original');
  await redis('rpush list a b c');

  const backupsUrl = (id: string) => `${envUrl}/services/${serviceId}/dependencies/${id}/backups`;
  const backUp = async (id: string): Promise<Json> => {
    const res = await api(backupsUrl(id), token, 'POST', {});
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const backupId = res.body.data.backup.id as string;
    return pollUntil(
      `backup of ${id} to end`,
      async () => {
        const list = await api(backupsUrl(id), token);
        const b = list.body.data.backups.find((x: Json) => x.id === backupId);
        return b?.state === 'completed' || b?.state === 'failed' ? b : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 250 },
    );
  };
  const taken: Record<string, Json> = {};
  for (const id of ['pg', 'maria', 'cache']) {
    const backup = await backUp(id);
    assert.equal(backup.state, 'completed', backup.error);
    assert.ok(backup.size_bytes > 0);
    taken[id] = backup;
  }
  // Each file under the target, complete, with the size the backup reports; nothing partial left.
  const files = await readdir(path.join(backupDir, envId), { recursive: true });
  assert.ok(!files.some((f) => f.endsWith('.partial')), files.join(', '));
  const pgFile = files.find((f) => f.includes(taken.pg?.id)) as string;
  assert.equal((await stat(path.join(backupDir, envId, pgFile))).size, taken.pg?.size_bytes);

  await psql("UPDATE notes SET v = 'changed'; INSERT INTO notes VALUES ('added')");
  await mysql("UPDATE notes SET v = 'changed'; INSERT INTO notes VALUES ('added')");
  await redis('set greeting changed');
  await redis('set added yes');
  await redis('del list');

  for (const id of ['pg', 'maria', 'cache']) {
    const url = `${backupsUrl(id)}/${taken[id]?.id}/restore`;
    const refused = await api(url, token, 'POST', {});
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.match(refused.body.message, /in use by service/);
    const res = await api(url, token, 'POST', { force: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.data.backup.restore.stopped_services, [serviceId]);
    const done = await pollUntil(
      `restore of ${id} to end`,
      async () => {
        const list = await api(backupsUrl(id), token);
        const b = list.body.data.backups.find((x: Json) => x.id === taken[id]?.id);
        return b?.restore?.state === 'completed' || b?.restore?.state === 'failed' ? b : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 250 },
    );
    assert.equal(done.restore.state, 'completed', done.restore.error);
  }

  assert.equal(await psql('SELECT v FROM notes ORDER BY v'), 'original-1\noriginal-2');
  assert.equal(await mysql('SELECT v FROM notes ORDER BY v'), 'original-1\noriginal-2');
  assert.equal(await redis('get greeting'), 'original');
  assert.equal(await redis('lrange list 0 -1'), 'a\nb\nc');
  assert.equal(await redis('exists added'), '0');
  // Redis keeps its append-only file: the restored data outlives a restart of the dependency.
  await docker.getContainer(`berth-dep-${cache.address}`).restart();
  assert.equal(
    await pollUntil('redis to answer again', () => redis('get greeting').catch(() => undefined)),
    'original',
  );

  // Into a new one: a copy holds the backup's data; the dependency keeps what it has now.
  await psql("UPDATE notes SET v = 'changed-again'");
  const intoNew = await api(`${backupsUrl('pg')}/${taken.pg?.id}/restore`, token, 'POST', { into: 'new' });
  assert.equal(intoNew.status, 200, JSON.stringify(intoNew.body));
  assert.deepEqual(intoNew.body.data.backup.restore.stopped_services, []);
  const copied = await pollUntil(
    'the restore into a new one to end',
    async () => {
      const list = await api(backupsUrl('pg'), token);
      const b = list.body.data.backups.find((x: Json) => x.id === taken.pg?.id);
      return b?.restore?.state === 'completed' || b?.restore?.state === 'failed' ? b : undefined;
    },
    { timeoutMs: 300_000, intervalMs: 250 },
  );
  assert.equal(copied.restore.state, 'completed', copied.restore.error);
  const copy = copied.restore.attributes as Record<string, string>;
  assert.equal(copy.address, `${pg.address}-restore`);
  assert.equal(
    await sh(
      `psql -At -h ${copy.address} -U ${copy.username} -d ${copy.dbName} -c "SELECT v FROM notes ORDER BY v"`,
      pgEnv,
    ),
    'original-1\noriginal-2',
  );
  assert.equal(await psql('SELECT DISTINCT v FROM notes'), 'changed-again');

  // The service stopped for the restores runs again.
  await pollUntil('the service to run again', async () => {
    const replicas = await docker.listContainers({ filters: { label: [`berth.service=${serviceId}`] } });
    return replicas.length > 0 ? true : undefined;
  });

  // Retention: maria keeps 2 completed backups (backup_keep), its oldest file discarded.
  await backUp('maria');
  const third = await backUp('maria');
  const kept = await pollUntil('retention to apply', async () => {
    const list = (await api(backupsUrl('maria'), token)).body.data.backups as Json[];
    return list.length === 2 ? list : undefined;
  });
  assert.equal(kept[0]?.id, third.id);
  assert.ok(!kept.some((b) => b.id === taken.maria?.id), 'the oldest went');
  const left = (await readdir(path.join(backupDir, envId), { recursive: true })).filter(
    (f) => f.endsWith('.sql') && f.includes(maria.address as string),
  );
  assert.equal(left.length, 2, left.join(', '));
});
