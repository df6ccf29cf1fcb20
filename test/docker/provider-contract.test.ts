import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { resourceName } from '../../src/domain/resource-names.ts';
import { dependencyNameOf } from '../../src/providers/engine/dependency-engines.ts';
import { openProvider } from '../../src/providers/registry.ts';
import { openStore } from '../../src/store/database.ts';
import { buildDependencyImages } from '../helpers/dependency-images.ts';
import {
  BASE_IMAGE,
  containersOfService,
  docker,
  processEnvironment,
  viaIngress,
} from '../helpers/docker.ts';
import { createRepo } from '../helpers/git.ts';
import { providerContract } from '../helpers/provider-contract.ts';
import { Servers } from '../helpers/server.ts';

// The driver in this process, no `berth serve`: the shared set-up's database, ingress port and clean-up.
providerContract('docker', async () => {
  const servers = await Servers.open('docker', {});
  await buildDependencyImages();
  // The sources test's repositories, cloned from here as from a git host, and the dependency backups.
  const ingressPort = servers.ingressPort;
  const gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-contract-git-'));
  const { database } = servers;
  const store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
  const config = {
    ...loadConfig({}),
    provider: 'docker',
    providerEnv: {
      BERTH_INGRESS_PORT: String(ingressPort),
      BERTH_GIT_BASE_URL: `file://${gitRoot}`,
      BERTH_DEPENDENCY_BACKUP_DIR: path.join(gitRoot, 'dependency-backups'),
    },
  };
  const provider = await openProvider(config, store.db, pino({ level: 'silent' }));
  const environment = { id: randomUUID(), account_id: randomUUID(), cloud: 'aws' as const, region: 'local' };
  servers.own(environment.id);
  const services = new Set<string>();
  return {
    provider,
    environment,
    capabilities: ['serving', 'resources', 'backups', 'sources'],
    spec: () => ({ docker_image: BASE_IMAGE.replace(/:latest$/, ''), run_command: 'sleep 3600' }),
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
    // Each running replica's, read from its process.
    environments: async (serviceId, deploymentId) =>
      Promise.all(
        (await containersOfService(serviceId, false))
          .filter(
            (c) => c.Labels['berth.role'] === 'replica' && c.Labels['berth.deployment'] === deploymentId,
          )
          .map((c) => processEnvironment(docker, c.Id)),
      ),
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
      // The container the dependency runs in ('' when there is none).
      fingerprint: async (serviceId, resource) => {
        const name = dependencyNameOf(resourceName(serviceId, resource));
        return docker
          .getContainer(name)
          .inspect()
          .then(
            (found) => found.Id,
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
    fingerprint: async (serviceId) => {
      services.add(serviceId);
      const running = await containersOfService(serviceId, false);
      return running
        .map((c) => c.Id)
        .sort()
        .join(',');
    },
    close: async () => {
      for (const id of services) {
        await provider.remove({
          id,
          account_id: environment.account_id,
          environment_id: environment.id,
          type: 'worker',
        });
      }
      await provider.close();
      await store.close();
      await servers.close();
      fs.rmSync(gitRoot, { recursive: true, force: true });
    },
  };
});
