import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { TimelineMark } from '../../src/domain/deployment-states.ts';
import { DEFAULT_OPS_CONFIG, type OpsConfig } from '../../src/domain/ops-json.ts';
import {
  DeployFailed,
  type DeployLog,
  type DesiredService,
  type EnvironmentRef,
  type Provider,
} from '../../src/providers/provider.ts';
import { viaIngress } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import {
  deploymentOf,
  openSwarmSuite,
  SWARM_IMAGE,
  type SwarmBerth,
  type SwarmSuite,
  serviceOutput,
  type TestSwarm,
} from '../helpers/swarm.ts';

/**
 * A web service on a real 2-node swarm, reached through Berth's ingress: two replicas, one per node,
 * which the environment's other services reach by name over its overlay network; a
 * new version whose health check fails, rolled back by the swarm while the old one serves; the loss of
 * a node, with the service answering throughout and its replicas rescheduled.
 */
let suite: SwarmSuite | undefined;
let swarm: TestSwarm;
let berth: SwarmBerth;
let provider: Provider;
let ingressPort: number;
let v1: string;
let v2: string;
let broken: string;
let environment: EnvironmentRef;
const never = new AbortController().signal;

const page = (version: string, healthy: boolean) =>
  'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n' +
  `CMD ["/bin/sh", "-c", "mkdir -p /www && echo \\"${version} says $GREETING from $(hostname)\\" > /www/index.html${healthy ? ' && echo ok > /www/ok' : ''} && exec httpd -f -p 8080 -h /www"]\n`;

before(async () => {
  suite = await openSwarmSuite(
    2,
    async (swarm) => {
      v1 = await swarm.pushImage('berth-swarm/web-v1', page('v1', true));
      v2 = await swarm.pushImage('berth-swarm/web-v2', page('v2', true));
      broken = await swarm.pushImage('berth-swarm/web-broken', page('broken', false));
      return { BERTH_SWARM_MONITOR_S: '2', BERTH_INGRESS_HOST: 'swarm.test' };
    },
    { serving: true },
  );
  ({ swarm, berth, provider, environment } = suite);
  ingressPort = berth.ingressPort;
});
after(() => suite?.close());

const ops: OpsConfig = {
  ...DEFAULT_OPS_CONFIG,
  health_check: { type: 'http', path: '/ok', port: 8080, timeout: 2 },
  deploy_timeout: 2,
};
const serviceId = randomUUID();
const host = `front-${serviceId.slice(0, 8)}.swarm.test`;

function desired(image: string, generation: number): DesiredService {
  return deploymentOf(environment, serviceId, image, {
    generation,
    spec: {
      subdomain: `front-${serviceId.slice(0, 8)}`,
      type: 'web',
      port: 8080,
      replica_count: 2,
      cpu_count_min: 0.1,
      cpu_count_max: 0.5,
      memory_mb_min: 16,
      memory_mb_max: 64,
    },
    variables: { GREETING: 'hello' },
    ops,
  });
}

/** The nodes that run the service's replicas now. */
async function nodesRunning(): Promise<string[]> {
  const tasks = await swarm.manager.listTasks({
    filters: { service: [`berth-${serviceId}`], 'desired-state': ['running'] },
  });
  return tasks
    .filter((t: { Status: { State: string } }) => t.Status.State === 'running')
    .map((t: { NodeID: string }) => t.NodeID)
    .sort();
}

/** Asks through the ingress until every request of `count` in a row answered with `expected`. */
async function answering(expected: RegExp, count: number): Promise<Set<string>> {
  const seen = new Set<string>();
  for (let i = 0; i < count; i++) {
    const res = await viaIngress(ingressPort, host);
    assert.equal(res.status, 200, `request ${i} answered ${res.status}: ${res.body}`);
    assert.match(res.body, expected);
    seen.add(res.body.trim());
  }
  return seen;
}

test('a 2-replica web service runs one replica per node, reached through the ingress', async () => {
  const applied = await provider.apply(desired(v1, 1), never);
  assert.match(applied.svcAlias, /^front-/);
  assert.deepEqual(await provider.observe(desired(v1, 1).service), {
    run_status: 'running',
    ready_count: 2,
    generation: 1,
  });
  const nodes = await nodesRunning();
  assert.equal(new Set(nodes).size, 2, `the replicas run on two nodes: ${nodes.join(', ')}`);
  const answers = await pollUntil('both replicas to answer through the ingress', async () => {
    const seen = await answering(/^v1 says hello from /, 4).catch(() => undefined);
    return seen && seen.size === 2 ? seen : undefined;
  });
  assert.equal(answers.size, 2, 'round robin over both replicas');
});

test('a service of the environment reaches both replicas by the subdomain, over the overlay network', async () => {
  const subdomain = `front-${serviceId.slice(0, 8)}`;
  // A job on either node: each wget resolves the name afresh (dnsrr: every task's address, shuffled).
  const job = deploymentOf(environment, randomUUID(), `${swarm.registry}/${SWARM_IMAGE}:latest`, {
    generation: 1,
    spec: {
      type: 'job',
      run_command: `for i in $(seq 12); do wget -qO- http://${subdomain}:8080/; done`,
    },
  });
  await provider.apply(job, never);
  const answers = (await serviceOutput(swarm.manager, `berth-job-${job.deploymentId}`))
    .split('\n')
    .filter((line) => line.startsWith('v1 says hello from '));
  assert.equal(answers.length, 12, 'every request was answered');
  assert.equal(new Set(answers).size, 2, 'both replicas (one on each node) answered over the overlay');
});

test('a new version that never turns healthy is rolled back by the swarm; the old one serves throughout', async () => {
  let serving = true;
  const failures: string[] = [];
  const watch = (async () => {
    while (serving) {
      const res = await viaIngress(ingressPort, host).catch((error: Error) => ({
        status: 0,
        body: error.message,
      }));
      if (res.status !== 200 || !res.body.startsWith('v1 says')) failures.push(`${res.status} ${res.body}`);
    }
  })();
  try {
    await assert.rejects(provider.apply(desired(broken, 2), never), (error: Error) => {
      assert.ok(error instanceof DeployFailed, `a DeployFailed, got ${error.constructor.name}`);
      assert.match(error.message, /did not become healthy: .*unhealthy/);
      assert.match(error.message, /previous version keeps serving/);
      return true;
    });
  } finally {
    serving = false;
    await watch;
  }
  assert.deepEqual(failures, [], 'every request during the rollout was answered by v1');
  const observed = await provider.observe(desired(v1, 1).service);
  assert.deepEqual(observed, { run_status: 'running', ready_count: 2, generation: 1 });
  await answering(/^v1 says/, 4);
});

test('losing a node: the service keeps answering, the swarm reschedules, ready_count drops and returns to 2', async () => {
  const service = desired(v1, 1).service;
  let watching = true;
  const failures: string[] = [];
  const counts: number[] = [];
  const watch = (async () => {
    while (watching) {
      const res = await viaIngress(ingressPort, host).catch((error: Error) => ({
        status: 0,
        body: error.message,
      }));
      if (res.status !== 200) failures.push(`${res.status} ${res.body}`);
      counts.push((await provider.observe(service)).ready_count);
    }
  })();
  try {
    await swarm.stopNode(2);
    await pollUntil('ready_count to drop', async () => (counts.some((c) => c < 2) ? true : undefined), {
      timeoutMs: 60_000,
    });
    const back = await pollUntil(
      'the replicas to run again on the node left',
      async () => {
        const observed = await provider.observe(service);
        const nodes = await nodesRunning();
        return observed.ready_count === 2 && new Set(nodes).size === 1 ? observed : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    assert.deepEqual(back, { run_status: 'running', ready_count: 2, generation: 1 });
  } finally {
    watching = false;
    await watch;
  }
  assert.deepEqual(failures, [], 'every request while the node was lost was answered');
  await answering(/^v1 says/, 4);
  await swarm.startNode(2);
});

test("an update's timeline: resolved, created, started, first healthy, the old version stopped, routed; the ingress serves the new version at once", async () => {
  const marks: TimelineMark[] = [];
  const log: DeployLog = {
    line: () => undefined,
    end: () => undefined,
    mark: (mark) => void (marks.includes(mark) || marks.push(mark)),
  };
  // The ingress knows v1's replicas before the update.
  await answering(/^v1 says/, 2);
  await provider.apply(desired(v2, 3), never, log);
  assert.deepEqual(marks, [
    'image_resolved',
    'container_created',
    'container_started',
    'first_healthy',
    'old_stopped',
    'routed',
  ]);
  await answering(/^v2 says hello from /, 4);
});
