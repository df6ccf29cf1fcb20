import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { DEFAULT_OPS_CONFIG } from '../../src/domain/ops-json.ts';
import type { EnvironmentRef, Provider } from '../../src/providers/provider.ts';
import { createRepo } from '../helpers/git.ts';
import { pollUntil } from '../helpers/poll.ts';
import { serviceSpecIn } from '../helpers/provider-contract.ts';
import {
  openSwarmSuite,
  SWARM_IMAGE,
  type SwarmSuite,
  serviceOutput,
  type TestSwarm,
} from '../helpers/swarm.ts';

/**
 * A git service on the swarm: built on the manager with the docker driver's code, pushed to
 * BERTH_SWARM_REGISTRY, and pulled from there by every node that runs a replica.
 */
let suite: SwarmSuite | undefined;
let swarm: TestSwarm;
let provider: Provider;
let gitRoot: string;
let commit: string;
let environment: EnvironmentRef;

before(async () => {
  suite = await openSwarmSuite(2, async (swarm) => {
    gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-swarm-git-'));
    [commit = ''] = await createRepo(gitRoot, 'acme/worker', [
      {
        message: 'release one',
        files: {
          Dockerfile: `FROM ${swarm.registry}/${SWARM_IMAGE}:latest\nCMD ["/bin/sh", "-c", "echo built from git for $AUDIENCE; sleep 3600"]\n`,
          'ops.json': JSON.stringify({ deploy_timeout: 3 }),
        },
      },
    ]);
    return { BERTH_SWARM_REGISTRY: swarm.registry, BERTH_GIT_BASE_URL: `file://${gitRoot}/` };
  });
  ({ swarm, provider, environment } = suite);
});
after(async () => {
  await suite?.close();
  if (gitRoot) fs.rmSync(gitRoot, { recursive: true, force: true });
});

test('a git service is built on the manager, pushed, and runs on both nodes from the registry', async () => {
  const id = randomUUID();
  const desired = {
    service: serviceSpecIn(environment, id, {
      source: 'github',
      replica_count: 2,
      git_repo_full_name: 'acme/worker',
      git_repo_branch: 'main',
      ops_json_path: 'ops.json',
    }),
    environment,
    deploymentId: randomUUID(),
    generation: 1,
    target: { commit_id: '', docker_image_tag: '', helm_chart_version: '' },
    ops: DEFAULT_OPS_CONFIG,
    variables: { AUDIENCE: 'the swarm' },
    domains: [],
  };
  const applied = await provider.apply(desired, new AbortController().signal);
  assert.equal(applied.source?.git_commit_ref, commit);
  assert.match(applied.source?.docker_image_digest ?? '', /^sha256:/);
  const tasks = await swarm.manager.listTasks({
    filters: { service: [`berth-${id}`], 'desired-state': ['running'] },
  });
  const nodes = new Set(tasks.map((t: { NodeID: string }) => t.NodeID));
  assert.equal(nodes.size, 2, 'each node pulled the built image from the registry');
  const image = (await swarm.manager.getService(`berth-${id}`).inspect()).Spec.TaskTemplate.ContainerSpec
    .Image;
  assert.equal(
    image,
    `${swarm.registry}/berth-${id}:${desired.deploymentId}@${applied.source?.docker_image_digest}`,
  );
  assert.deepEqual(await provider.observe(desired.service), {
    run_status: 'running',
    ready_count: 2,
    generation: 1,
  });
  // The built image's own CMD ran behind the loader of the variables (the image was on the manager).
  await pollUntil('the replicas to print what they were told', async () =>
    (await serviceOutput(swarm.manager, `berth-${id}`)).includes('built from git for the swarm')
      ? true
      : undefined,
  );
});
