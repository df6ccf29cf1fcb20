import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type Docker from 'dockerode';
import { TerminalError } from '../../jobs/errors.ts';
import type { DumpTarget } from '../engine/dependency-dumps.ts';
import type { BackupRequest } from '../provider.ts';
import { DockerDependencyBackups } from './dependency-backups.ts';
import type { DockerResources } from './resources.ts';

/** The parts of the Engine a backup reads before it writes: the dependency's container, running. */
const engine = {
  getContainer: () => ({
    inspect: async () => ({ Id: 'x', Name: '/berth-dep-db', Config: { Image: 'img', Env: [] }, Mounts: [] }),
  }),
  listContainers: async () => [],
  createContainer: async () => {
    throw new Error('no helper may run when the target cannot be written');
  },
} as unknown as Docker;

const request: BackupRequest = {
  service: { id: '00000000-0000-4000-8000-000000000001', account_id: 'a', environment_id: 'e', type: 'web' },
  environment: {
    id: '00000000-0000-4000-8000-000000000002',
    account_id: 'a',
    cloud: 'aws',
    region: 'us-east-1',
  },
  resource: {
    kind: 'rds',
    type: 'instances',
    id: 'db',
    prefix: 'db',
    exports: {},
    skip_preview: false,
    preview_only: false,
    properties: { engine: 'postgres' },
  },
  backupId: '00000000-0000-4000-8000-000000000003',
};

let dir: string;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'berth-backups-'));
});
after(() => rm(dir, { recursive: true, force: true }));

test('a backup target that cannot be written fails the backup for good, naming it, and writes nothing', async () => {
  // A file where the target's folder should be: nothing can be made under it.
  const target = path.join(dir, 'not-a-folder');
  await writeFile(target, '');
  const backups = new DockerDependencyBackups(engine, target, {} as DockerResources);
  await assert.rejects(
    backups.backup(request, new AbortController().signal),
    (error: Error) =>
      error instanceof TerminalError &&
      error.message.startsWith(`the backup target ${target} is not writable`),
  );
  assert.deepEqual(await readdir(dir), ['not-a-folder']);
});

test('a location outside the backup target is refused, never read or deleted', async () => {
  const backups = new DockerDependencyBackups(engine, path.join(dir, 'target'), {} as DockerResources);
  await writeFile(path.join(dir, 'precious'), 'x');
  await assert.rejects(backups.discard(request.environment, '../precious'), /outside the backup target/);
  assert.ok((await readdir(dir)).includes('precious'));
});

/** One service with one replica container, counting what a restore's stop and start do to it. */
function oneReplica() {
  const calls: string[] = [];
  const docker = {
    listContainers: async () => [{ Id: 'replica' }],
    getContainer: () => ({
      stop: async () => {
        calls.push('stop');
      },
      start: async () => {
        calls.push('start');
      },
    }),
  } as unknown as Docker;
  const backups = new DockerDependencyBackups(docker, dir, {} as DockerResources) as unknown as {
    stopServices(services: BackupRequest['service'][], signal: AbortSignal): Promise<() => Promise<void>>;
  };
  return { calls, stopServices: (signal: AbortSignal) => backups.stopServices([request.service], signal) };
}

test("a restore stops the services' replicas and starts them again after", async () => {
  const { calls, stopServices } = oneReplica();
  const restart = await stopServices(new AbortController().signal);
  assert.deepEqual(calls, ['stop']);
  await restart();
  assert.deepEqual(calls, ['stop', 'start']);
});

test('an attempt that lost its lease leaves the replicas stopped for the attempt that took the job over', async () => {
  const { calls, stopServices } = oneReplica();
  const lease = new AbortController();
  const restart = await stopServices(lease.signal);
  lease.abort(new Error('the lease of this job was lost'));
  await restart();
  assert.deepEqual(calls, ['stop']);
});

test("a release starts the stopped replicas of the service's newest generation; running ones and an older generation's stay as they are", async () => {
  const started: string[] = [];
  const replica = (Id: string, generation: string, State: string) => ({
    Id,
    State,
    Labels: { 'berth.generation': generation },
  });
  const docker = {
    listContainers: async () => [
      replica('old', '3', 'exited'),
      replica('stopped', '4', 'exited'),
      replica('running', '4', 'running'),
      replica('gone', '4', 'exited'),
    ],
    getContainer: (id: string) => ({
      start: async () => {
        if (id === 'gone') throw Object.assign(new Error('no such container'), { statusCode: 404 });
        started.push(id);
      },
    }),
  } as unknown as Docker;
  const backups = new DockerDependencyBackups(docker, dir, {} as DockerResources);
  await backups.release(request.environment, [request.service]);
  assert.deepEqual(started, ['stopped']);
});

/** A redis dependency's container and a helper that ends as `helper` says, counting what happens to it. */
function redisLoad(helper: (lease: AbortController) => { code: number; stderr: string }) {
  const calls: string[] = [];
  const container = {
    inspect: async () => ({ Name: '/berth-dep-cache', Mounts: [{ Destination: '/data', Name: 'vol' }] }),
    stop: async () => {
      calls.push('stop');
    },
    start: async () => {
      calls.push('start');
    },
  };
  const docker = { getContainer: () => container } as unknown as Docker;
  const lease = new AbortController();
  const backups = new DockerDependencyBackups(docker, dir, {} as DockerResources) as unknown as {
    runHelper(): Promise<{ code: number; stderr: string }>;
    loadRedis(request: BackupRequest, target: DumpTarget, file: string, signal: AbortSignal): Promise<void>;
  };
  backups.runHelper = async () => {
    calls.push('load');
    return helper(lease);
  };
  const target = { name: 'cache', runName: 'berth-dep-cache', image: 'redis' } as DumpTarget;
  return { calls, load: () => backups.loadRedis(request, target, '/dump.rdb', lease.signal) };
}

test('a redis load stops the dependency, loads its volume and starts it again, also when the load fails', async () => {
  const loaded = redisLoad(() => ({ code: 0, stderr: '' }));
  await loaded.load();
  assert.deepEqual(loaded.calls, ['stop', 'load', 'start']);
  const failed = redisLoad(() => ({ code: 1, stderr: 'bad dump' }));
  await assert.rejects(failed.load(), /loading the redis dump failed \(exit code 1\): bad dump/);
  assert.deepEqual(failed.calls, ['stop', 'load', 'start']);
});

test('a redis load whose attempt lost its lease leaves the dependency stopped for the attempt loading it now', async () => {
  // The attempt that took the job over removed this one's helper (killed: 137) to run its own.
  const { calls, load } = redisLoad((lease) => {
    lease.abort(new Error('the lease of this job was lost'));
    return { code: 137, stderr: '' };
  });
  await assert.rejects(load());
  assert.deepEqual(calls, ['stop', 'load']);
});
