import assert from 'node:assert/strict';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { before, test } from 'node:test';
import { demultiplex } from '../../src/providers/engine/output.ts';
import { buildDependencyImages } from '../helpers/dependency-images.ts';
import { docker } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, dependenciesOf, deploymentEnd } from '../helpers/process.ts';
import { KILLED_SERVER, serverFixture } from '../helpers/server.ts';

/**
 * Issue 30: Berth SIGKILLed in the middle of a dependency backup leaves no file under the backup's
 * complete name (only its `.partial`); started again, the backup's job runs again and completes, and
 * the helper the killed process left is gone.
 */
const server = serverFixture('docker', {
  ...KILLED_SERVER,
  BERTH_DEPENDENCY_BACKUP_INTERVAL_HOURS: '0',
});
before(() => buildDependencyImages(), { timeout: 1_800_000 });

test('SIGKILL during a postgres backup: no complete-named partial file; after a restart the backup completes', async () => {
  const backupDir = path.join(server.database.dataDir, 'dependency-backups');
  const env = { BERTH_DEPENDENCY_BACKUP_DIR: backupDir };
  const first = await server.serve(env);
  const started = await server.firstStart(first);
  const { token, envUrl } = started;
  const network = {
    Labels: { 'berth.environment': started.envId },
    HostConfig: { NetworkMode: `berth-env-${started.envId}` },
  };
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Crash Backup',
    source: 'docker_image',
    docker_image: 'berth-deps/postgres',
    type: 'job',
    run_command: 'true',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 64,
    ops_json: JSON.stringify({
      dependencies: { rds: { instances: [{ id: 'db', prefix: 'crashbackup', exports: { H: '$address' } }] } },
    }),
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const serviceId = created.body.data.service.id as string;
  const deploy = await api(`${envUrl}/services/${serviceId}/deploy`, token, 'POST', {});
  const deployed = await deploymentEnd(first.url, token, deploy.body.data.deployment_id, 900_000);
  assert.equal(deployed.state, 'success', deployed.failure_reason);
  const { attributes } = (await dependenciesOf(envUrl, token, serviceId))[0] as {
    attributes: Record<string, string>;
  };
  const info = await docker.getContainer(`berth-dep-${attributes.address}`).inspect();
  const password = (info.Config.Env.find((e) => e.startsWith('POSTGRES_PASSWORD=')) as string).split('=')[1];

  // A session holds the table locked for a while: pg_dump waits for it, so the backup is caught midway.
  const holder = await docker.createContainer({
    Image: 'berth-deps/postgres:latest',
    Cmd: [
      'psql',
      '-h',
      attributes.address as string,
      '-U',
      attributes.username as string,
      '-d',
      attributes.dbName as string,
      '-c',
      "CREATE TABLE notes (v text); INSERT INTO notes VALUES ('kept')",
      '-c',
      'BEGIN; LOCK TABLE notes IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(20); COMMIT',
    ],
    Env: [`PGPASSWORD=${password}`],
    ...network,
  });
  await holder.start();
  await pollUntil('the table to be locked', async () => {
    const probe = await docker.createContainer({
      Image: 'berth-deps/postgres:latest',
      Cmd: [
        'psql',
        '-At',
        '-h',
        attributes.address as string,
        '-U',
        attributes.username as string,
        '-d',
        attributes.dbName as string,
        '-c',
        "SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' AND relation = to_regclass('notes')",
      ],
      Env: [`PGPASSWORD=${password}`],
      ...network,
    });
    try {
      await probe.start();
      await probe.wait();
      const output = demultiplex(await probe.logs({ stdout: true, stderr: true })).trim();
      return output === '1' ? true : undefined;
    } finally {
      await probe.remove({ force: true });
    }
  });

  const url = `${envUrl}/services/${serviceId}/dependencies/db/backups`;
  const res = await api(url, token, 'POST', {});
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const backupId = res.body.data.backup.id as string;
  const dir = path.join(backupDir, started.envId);
  const partial = await pollUntil('the backup to be writing', async () => {
    const files = await readdir(dir, { recursive: true }).catch(() => []);
    return files.find((f) => f.includes(backupId) && f.endsWith('.partial'));
  });
  await first.kill('SIGKILL');
  const left = await readdir(dir, { recursive: true });
  assert.deepEqual(
    left.filter((f) => f.includes(backupId)),
    [partial],
    'only the partial file: nothing under the complete name',
  );

  const second = await server.serve(env);
  try {
    const done = await pollUntil(
      'the backup to end after the restart',
      async () => {
        const list = await api(`${second.url}${new URL(url).pathname}`, token);
        const b = list.body.data.backups.find((x: { id: string }) => x.id === backupId);
        return b?.state === 'completed' || b?.state === 'failed' ? b : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    assert.equal(done.state, 'completed', done.error);
    const files = (await readdir(dir, { recursive: true })).filter((f) => f.includes(backupId));
    assert.deepEqual(files, [partial.replace(/\.partial$/, '')]);
    assert.equal((await stat(path.join(dir, files[0] as string))).size, done.size_bytes);
    const helpers = await docker.listContainers({
      all: true,
      filters: { label: [`berth.backup-of=berth-dep-${attributes.address}`] },
    });
    assert.deepEqual(helpers, [], 'the killed attempt left no helper behind');
  } finally {
    await second.kill('SIGTERM');
  }
});
