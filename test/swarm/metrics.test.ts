import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import type Docker from 'dockerode';
import { DEFAULT_OPS_CONFIG } from '../../src/domain/ops-json.ts';
import type {
  DesiredService,
  EnvironmentRef,
  MetricsSubject,
  Provider,
  ServiceSample,
} from '../../src/providers/provider.ts';
import { pollUntil } from '../helpers/poll.ts';
import {
  deploymentOf,
  openSwarmProvider,
  openSwarmSuite,
  type SwarmBerth,
  type SwarmSuite,
  type TestSwarm,
} from '../helpers/swarm.ts';

/**
 * A service's CPU, memory and restarts on a real 2-node swarm: its two replicas (one per node) are read
 * from the Engines of the nodes they run on (BERTH_SWARM_NODE_ENGINES, nodes named by ID: the test's
 * nodes share this machine's hostname), and a replica that dies is a restart, from the manager's task
 * history. A driver without the setting still counts restarts.
 */
let suite: SwarmSuite | undefined;
let swarm: TestSwarm;
let bare: SwarmBerth;
let provider: Provider;
let image: string;
let environment: EnvironmentRef;
const never = new AbortController().signal;
const serviceId = randomUUID();
const LIMIT = 64 * 1024 * 1024;

before(async () => {
  suite = await openSwarmSuite(2, async (swarm) => {
    // About 24 MB held for the life of the replica (a shell variable), behind httpd.
    image = await swarm.pushImage(
      'berth-swarm/metrics-web',
      'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n' +
        'CMD ["/bin/sh", "-c", "hold=$(head -c 24000000 /dev/zero | tr \'\\\\0\' a); mkdir -p /www && echo ok > /www/index.html && httpd -p 8080 -h /www && while true; do sleep 3600; done"]\n',
    );
    const nodeEngines = await Promise.all(
      [1, 2].map(async (n) => `${(await swarm.node(n).info()).Swarm.NodeID}=${swarm.dockerHostOf(n)}`),
    );
    bare = await openSwarmProvider({ DOCKER_HOST: swarm.dockerHost, BERTH_SWARM_MONITOR_S: '1' });
    return { BERTH_SWARM_NODE_ENGINES: nodeEngines.join(',') };
  });
  ({ swarm, provider, environment } = suite);
});
after(async () => {
  await bare?.close();
  await suite?.close();
});

function web(): DesiredService {
  return deploymentOf(environment, serviceId, image, {
    generation: 1,
    spec: {
      subdomain: `metrics-${serviceId.slice(0, 8)}`,
      type: 'web',
      port: 8080,
      replica_count: 2,
      cpu_count_min: 0.1,
      cpu_count_max: 0.5,
      memory_mb_min: 16,
      memory_mb_max: 64,
    },
    ops: { ...DEFAULT_OPS_CONFIG, health_check: { type: 'http', path: '/', port: 8080, timeout: 2 } },
  });
}

interface RunningTask {
  ID: string;
  NodeID: string;
  Status: { State: string; ContainerStatus?: { ContainerID?: string } };
  DesiredState: string;
}

async function runningTasks(): Promise<RunningTask[]> {
  const tasks = (await swarm.manager.listTasks({
    filters: { service: [`berth-${serviceId}`] },
  })) as RunningTask[];
  return tasks.filter((t) => t.DesiredState === 'running' && t.Status.State === 'running');
}

test("replicas' CPU and memory come from their nodes' Engines, restarts from the task history", async () => {
  const applied = web();
  await provider.apply(applied, never);
  const subject: MetricsSubject = { ...applied.service };
  const tasks = await runningTasks();
  assert.equal(tasks.length, 2);
  assert.equal(new Set(tasks.map((t) => t.NodeID)).size, 2, 'one replica per node');

  // The first sample starts each counter; the next reports CPU over the interval between them.
  const first = (await provider.metrics.sample(subject)) as ServiceSample;
  assert.ok(first, 'a sample of a running service');
  assert.equal(first.restarts, 0);
  assert.equal((await bare.provider.metrics.sample(subject))?.restarts, 0);
  const second = (await provider.metrics.sample(subject)) as ServiceSample;
  assert.equal(second.memory_limit_bytes, LIMIT);
  assert.ok(
    second.memory_bytes !== null && second.memory_bytes > 20_000_000 && second.memory_bytes <= LIMIT,
    `each replica holds about 24 MB: ${second.memory_bytes}`,
  );
  assert.ok(second.cpu_cores !== null && second.cpu_cores >= 0, `CPU read: ${second.cpu_cores}`);
  assert.ok(second.network_rx_bytes !== null, 'network read');
  assert.equal(second.restarts, 0);

  // Without the nodes' Engines: no CPU or memory, requests and restarts still.
  const withoutEngines = await bare.provider.metrics.sample(subject);
  assert.equal(withoutEngines?.cpu_cores, null);
  assert.equal(withoutEngines?.memory_bytes, null);

  // A replica dies (its container killed on its node): the swarm starts another task in its slot.
  const victim = tasks[0] as RunningTask;
  const node = (await swarm.node(1).info()).Swarm.NodeID === victim.NodeID ? 1 : 2;
  const container = victim.Status.ContainerStatus?.ContainerID as string;
  await (swarm.node(node) as Docker).getContainer(container).kill();
  await pollUntil(
    'a new task to replace the dead one',
    async () => {
      const now = await runningTasks();
      return now.length === 2 && !now.some((t) => t.ID === victim.ID) ? true : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 250 },
  );
  // The manager learns that the old task failed from its node, a moment after it stopped wanting it.
  let restarts = 0;
  let bareRestarts = 0;
  await pollUntil(
    'the dead replica to count as a restart',
    async () => {
      restarts += (await provider.metrics.sample(subject))?.restarts ?? 0;
      bareRestarts += (await bare.provider.metrics.sample(subject))?.restarts ?? 0;
      if (restarts > 0 && bareRestarts > 0) return true;
      const tasks = (await swarm.manager.listTasks({
        filters: { service: [`berth-${serviceId}`] },
      })) as RunningTask[];
      throw new Error(
        `the tasks: ${JSON.stringify(tasks.map((t) => [t.ID, t.DesiredState, t.Status.State]))}`,
      );
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  assert.deepEqual([restarts, bareRestarts], [1, 1], 'the dead replica is one restart');
  assert.equal((await provider.metrics.sample(subject))?.restarts, 0, 'counted once');
});
