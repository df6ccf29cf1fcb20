import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { DesiredService, EnvironmentRef, Provider } from '../../src/providers/provider.ts';
import { pollUntil } from '../helpers/poll.ts';
import {
  deploymentOf,
  openSwarmSuite,
  SWARM_IMAGE,
  type SwarmSuite,
  type TestSwarm,
} from '../helpers/swarm.ts';

/**
 * The loss of a manager: a swarm of three managers keeps its Raft majority when the leader's engine
 * stops; Berth, pointed at a manager left, sees the lost node's replica started elsewhere and deploys a
 * new version as before.
 */
let suite: SwarmSuite | undefined;
let swarm: TestSwarm;
let provider: Provider;
let environment: EnvironmentRef;
const never = new AbortController().signal;
const serviceId = randomUUID();

interface NodeInfo {
  ID: string;
  Version: { Index: number };
  Spec: Record<string, unknown>;
  ManagerStatus?: { Leader?: boolean; Reachability?: string };
}

before(async () => {
  suite = await openSwarmSuite(3, async (swarm) => {
    for (const node of (await swarm.manager.listNodes()) as NodeInfo[]) {
      if (node.ManagerStatus) continue;
      await swarm.manager
        .getNode(node.ID)
        .update({ version: node.Version.Index, ...node.Spec, Role: 'manager' });
    }
    await pollUntil('three reachable managers', async () => {
      const nodes = (await swarm.manager.listNodes()) as NodeInfo[];
      return nodes.filter((n) => n.ManagerStatus?.Reachability === 'reachable').length === 3
        ? true
        : undefined;
    });
    // Not the first node: that is the leader this test stops.
    return { DOCKER_HOST: swarm.dockerHostOf(2) };
  });
  ({ swarm, provider, environment } = suite);
});
after(() => suite?.close());

function desired(generation: number): DesiredService {
  return deploymentOf(environment, serviceId, `${swarm.registry}/${SWARM_IMAGE}:latest`, {
    generation,
    spec: { type: 'worker', replica_count: 3, run_command: `echo version ${generation}; exec sleep 3600` },
    variables: { GREETING: 'hello' },
    ops: { deploy_timeout: 3 },
  });
}

test('the leader manager lost: the managers left elect one, the replicas move, a new version deploys', async () => {
  await provider.apply(desired(1), never);
  assert.equal((await provider.observe(desired(1).service)).ready_count, 3);

  await swarm.stopNode(1);
  const survivor = swarm.node(2);
  const leader = await pollUntil(
    'a manager left to lead',
    async () => {
      const nodes = (await survivor.listNodes().catch(() => [])) as NodeInfo[];
      return nodes.find((n) => n.ManagerStatus?.Leader && n.ManagerStatus.Reachability === 'reachable');
    },
    { timeoutMs: 90_000 },
  );
  assert.ok(leader);
  const back = await pollUntil(
    'three replicas to run on the nodes left',
    async () => {
      const observed = await provider.observe(desired(1).service).catch(() => undefined);
      return observed?.ready_count === 3 ? observed : undefined;
    },
    { timeoutMs: 120_000 },
  );
  assert.deepEqual(back, { run_status: 'running', ready_count: 3, generation: 1 });

  const next = desired(2);
  await provider.apply(next, never);
  assert.deepEqual(await provider.observe(next.service), {
    run_status: 'running',
    ready_count: 3,
    generation: 2,
  });
});
