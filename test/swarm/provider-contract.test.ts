import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resourceName } from '../../src/domain/resource-names.ts';
import { dependencyNameOf } from '../../src/providers/engine/dependency-engines.ts';
import { buildDependencyImages } from '../helpers/dependency-images.ts';
import { processEnvironment, viaIngress } from '../helpers/docker.ts';
import { createRepo } from '../helpers/git.ts';
import { providerContract } from '../helpers/provider-contract.ts';
import { openSwarmProvider, SWARM_IMAGE, startSwarm } from '../helpers/swarm.ts';

providerContract('swarm', async () => {
  const swarm = await startSwarm(2);
  await buildDependencyImages();
  // The nodes pull from the swarm's registry: the redis the resources test makes is pushed there.
  const redis = await swarm.pushLocalImage('berth-deps/redis:latest', 'berth-deps/redis');
  // The sources test's repositories, cloned from here as from a git host, and the dependency backups.
  const gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-contract-git-'));
  const berth = await openSwarmProvider({
    DOCKER_HOST: swarm.dockerHost,
    BERTH_SWARM_MONITOR_S: '1',
    BERTH_DOCKER_REDIS_IMAGE: redis,
    BERTH_GIT_BASE_URL: `file://${gitRoot}`,
    BERTH_DEPENDENCY_BACKUP_DIR: path.join(gitRoot, 'dependency-backups'),
  });
  const { provider, ingressPort } = berth;
  return {
    provider,
    environment: { id: randomUUID(), account_id: randomUUID(), cloud: 'aws', region: 'local' },
    capabilities: ['serving', 'resources', 'backups', 'sources'],
    spec: () => ({ docker_image: SWARM_IMAGE, docker_registry: swarm.registry, run_command: 'sleep 3600' }),
    printOnce: (text) => ({ run_command: `echo ${text}` }),
    printEvery: (text) => ({ run_command: `while true; do echo ${text}; sleep 0.3; done` }),
    printAndExit: (text, code) => ({ run_command: `echo ${text}; exit ${code}` }),
    serve: (text) => ({
      type: 'web',
      port: 8080,
      run_command: `mkdir -p /www && echo ${text} > /www/index.html && exec httpd -f -p 8080 -h /www`,
    }),
    // Through the ingress, as the service's public host name.
    answer: async (service) => {
      const res = await viaIngress(ingressPort, `${service.subdomain}.localhost`);
      return res.status === 200 ? res.body.trim() : null;
    },
    // Each running task's, read from its process on the node that runs it.
    environments: async (serviceId, deploymentId) => {
      const found: Record<string, string>[] = [];
      for (const n of [1, 2]) {
        const node = swarm.node(n);
        const containers = await node.listContainers({
          filters: {
            label: [`com.docker.swarm.service.name=berth-${serviceId}`, `berth.deployment=${deploymentId}`],
          },
        });
        for (const c of containers) found.push(await processEnvironment(node, c.Id));
      }
      return found;
    },
    realLogs: true,
    resources: {
      makes: {
        kind: 'elasticache',
        type: 'clusters',
        id: 'contract-cache',
        prefix: 'contract-cache',
        exports: {},
        skip_preview: false,
        preview_only: false,
        properties: { engine: 'redis' },
      },
      refuses: {
        kind: 'sqs',
        type: 'queues',
        id: 'contract-queue',
        prefix: 'contract-queue',
        exports: {},
        skip_preview: false,
        preview_only: false,
        properties: {},
      },
      // The swarm service the dependency runs in ('' when there is none).
      fingerprint: async (serviceId, resource) => {
        const name = dependencyNameOf(resourceName(serviceId, resource));
        return swarm.manager
          .getService(name)
          .inspect()
          .then(
            (found) => found.ID,
            (error: { statusCode?: number }) => {
              if (error.statusCode === 404) return '';
              throw error;
            },
          );
      },
    },
    repository: async (files) => {
      const repo = `contract/repo-${randomUUID().slice(0, 8)}`;
      await createRepo(gitRoot, repo, [{ message: 'contract', files }]);
      return { git_repo_full_name: repo, git_repo_branch: 'main' };
    },
    failing: (desired) => ({ ...desired, service: { ...desired.service, source: 'helm_chart' } }),
    // The serving service's running tasks: a rollout replaces them, and nothing else does.
    fingerprint: async (serviceId) => {
      const tasks = await swarm.manager.listTasks({
        filters: { service: [`berth-${serviceId}`], 'desired-state': ['running'] },
      });
      return tasks
        .map((t: { ID: string }) => t.ID)
        .sort()
        .join(',');
    },
    close: async () => {
      await berth.close();
      fs.rmSync(gitRoot, { recursive: true, force: true });
      await swarm.down();
    },
  };
});
