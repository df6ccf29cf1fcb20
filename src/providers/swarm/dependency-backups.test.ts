import assert from 'node:assert/strict';
import { test } from 'node:test';
import type Docker from 'dockerode';
import { TerminalError } from '../../jobs/errors.ts';
import type { ServiceRef } from '../provider.ts';
import { SwarmDependencyBackups } from './dependency-backups.ts';
import type { SwarmResources } from './resources.ts';
import type { Task } from './services.ts';

const service: ServiceRef = {
  id: '00000000-0000-4000-8000-000000000001',
  account_id: 'a',
  environment_id: 'e',
  type: 'worker',
};

/**
 * A swarm of one serving service, as much of the Engine as a restore's stop and start use: its spec
 * under a version the update must name (a stale one is refused, as the swarm does), and its tasks.
 */
function fakeSwarm(replicas: number, tasks: () => Task[] = () => []) {
  const swarm = {
    version: 1,
    spec: {
      Name: 'berth-s',
      Labels: { 'berth.role': 'replica' },
      Mode: { Replicated: { Replicas: replicas } },
    },
    writes: [],
  } as { version: number; spec: Docker.ServiceSpec; writes: Docker.ServiceSpec[] };
  const docker = {
    listServices: async () => [{ ID: 'svc' }],
    getService: () => ({
      inspect: async () => ({
        ID: 'svc',
        Version: { Index: swarm.version },
        Spec: structuredClone(swarm.spec),
      }),
      update: async ({ version, ...spec }: Docker.ServiceSpec & { version: number }) => {
        if (version !== swarm.version) throw new Error('update out of sequence');
        swarm.spec = spec;
        swarm.writes.push(structuredClone(spec));
        swarm.version++;
      },
    }),
    listTasks: async () => tasks(),
  } as unknown as Docker;
  return { swarm, docker };
}

/** stopServices as the restore calls it (it is the driver's protected step). */
function stopper(docker: Docker) {
  const backups = new SwarmDependencyBackups(
    docker,
    '/nonexistent',
    {} as SwarmResources,
    1000,
  ) as unknown as {
    stopServices(services: ServiceRef[], signal: AbortSignal): Promise<() => Promise<void>>;
  };
  return (signal = new AbortController().signal) => backups.stopServices([service], signal);
}

const replicasOf = (spec: Docker.ServiceSpec) => spec.Mode?.Replicated?.Replicas;

test('a restore gives back the replicas it took, and only while the hold is its own', async () => {
  const { swarm, docker } = fakeSwarm(3);
  const stop = stopper(docker);

  // An attempt that lost its job's lease runs on while the next attempt of the job takes the hold.
  const restartLost = await stop();
  assert.equal(replicasOf(swarm.spec), 0);
  const restartRetry = await stop();
  await restartLost();
  assert.equal(replicasOf(swarm.spec), 0, 'the lost attempt must not start the service under the retry');
  await restartRetry();
  assert.equal(replicasOf(swarm.spec), 3);
  assert.deepEqual(swarm.spec.Labels, { 'berth.role': 'replica' });

  // The next restore of the service holds it: an earlier restore's late start leaves it down too.
  const restartNext = await stop();
  await restartLost();
  await restartRetry();
  assert.equal(replicasOf(swarm.spec), 0);
  await restartNext();
  assert.equal(replicasOf(swarm.spec), 3);
});

test('a hold left by a crashed attempt is taken over with the count it kept', async () => {
  const { swarm, docker } = fakeSwarm(0);
  swarm.spec.Labels = { ...swarm.spec.Labels, 'berth.restore-replicas': '2', 'berth.restore-holder': 'gone' };
  const restart = await stopper(docker)();
  await restart();
  assert.equal(replicasOf(swarm.spec), 2);
});

test('a task that does not stop fails the restore with what each live task was doing, and the service is started again', async (t) => {
  const stuck: Task[] = [
    {
      ID: 'task-removed',
      NodeID: 'node-2',
      DesiredState: 'remove',
      Spec: {},
      Status: { State: 'running', Message: 'started' },
    },
    {
      ID: 'task-wanted',
      DesiredState: 'running',
      Spec: {},
      Status: { State: 'pending', Message: 'pending task scheduling', Err: 'no suitable node' },
    },
    { ID: 'task-done', NodeID: 'node-1', DesiredState: 'remove', Spec: {}, Status: { State: 'shutdown' } },
  ];
  const { swarm, docker } = fakeSwarm(1, () => stuck);
  // Each look at the clock is a minute later: the 2-minute wait is over after a few polls.
  let now = Date.now();
  t.mock.method(Date, 'now', () => {
    now += 60_000;
    return now;
  });
  await assert.rejects(stopper(docker)(), (error: Error) => {
    assert.ok(error instanceof TerminalError);
    assert.equal(
      error.message,
      'the swarm service svc did not stop its 2 task(s) in time for the restore: ' +
        'task-removed (desired remove, running: "started", node node-2); ' +
        'task-wanted (desired running, pending: "pending task scheduling", error "no suitable node", node none)',
    );
    return true;
  });
  assert.equal(replicasOf(swarm.spec), 1);
});

test('a scale-down the swarm leaves unacted on is written again, and the restore goes on once the tasks end', async (t) => {
  const { swarm, docker } = fakeSwarm(1, () =>
    // Live until a spec of no replicas is written a second time, as the swarm does at times.
    swarm.writes.filter((spec) => replicasOf(spec) === 0).length < 2
      ? [{ ID: 'task', DesiredState: 'running', Spec: {}, Status: { State: 'running' } }]
      : [],
  );
  // Each look at the clock is 10 s later: past the 15 s before the spec is written again.
  let now = Date.now();
  t.mock.method(Date, 'now', () => {
    now += 10_000;
    return now;
  });
  const restart = await stopper(docker)();
  assert.equal(swarm.writes.length, 2, 'the scale-down, then the same spec once more');
  assert.deepEqual(swarm.writes[1], swarm.writes[0]);
  assert.equal(swarm.spec.Labels?.['berth.restore-replicas'], '1');
  await restart();
  assert.equal(replicasOf(swarm.spec), 1);
});

test('an attempt that loses its job stops waiting for the tasks to end', async () => {
  const lease = new AbortController();
  const { docker } = fakeSwarm(1, () => {
    lease.abort(new Error('the lease of this job was lost'));
    return [{ ID: 'task', DesiredState: 'remove', Spec: {}, Status: { State: 'running' } }];
  });
  await assert.rejects(stopper(docker)(lease.signal), /the lease of this job was lost/);
});

test('tasks that cannot be listed are no sign that they stopped: the attempt fails, the service starts again', async () => {
  const { swarm, docker } = fakeSwarm(2, () => {
    throw Object.assign(new Error('the manager lost its quorum'), { statusCode: 500 });
  });
  await assert.rejects(stopper(docker)(), /lost its quorum/);
  assert.equal(replicasOf(swarm.spec), 2);
});

test('a release gives back a hold whichever attempt took it, and leaves a service nothing holds as it is', async () => {
  const { swarm, docker } = fakeSwarm(0);
  swarm.spec.Labels = { ...swarm.spec.Labels, 'berth.restore-replicas': '2', 'berth.restore-holder': 'dead' };
  const backups = new SwarmDependencyBackups(docker, '/nonexistent', {} as SwarmResources, 1000);
  const environment = { id: 'e', account_id: 'a', cloud: 'aws' as const, region: 'us-east-1' };
  await backups.release(environment, [service]);
  assert.equal(replicasOf(swarm.spec), 2);
  assert.deepEqual(swarm.spec.Labels, { 'berth.role': 'replica' });
  // Scaled to none by its owner since: not a restore's to change.
  swarm.spec.Mode = { Replicated: { Replicas: 0 } };
  const version = swarm.version;
  await backups.release(environment, [service]);
  assert.equal(replicasOf(swarm.spec), 0);
  assert.equal(swarm.version, version, 'nothing written');
});
