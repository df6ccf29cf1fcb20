import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { openProvider } from '../../src/providers/registry.ts';
import { simTables } from '../../src/providers/sim/tables.ts';
import { openStore } from '../../src/store/database.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { providerContract } from '../helpers/provider-contract.ts';

providerContract('sim', async () => {
  const database = await createTestDatabase();
  const store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
  const config = { ...loadConfig({}), provider: 'sim', providerEnv: { BERTH_SIM_STEP_MS: '10' } };
  const provider = await openProvider(config, store.db, pino({ level: 'silent' }));
  return {
    provider,
    environment: { id: randomUUID(), account_id: randomUUID(), cloud: 'aws', region: 'us-east-1' },
    capabilities: ['serving', 'secrets', 'resources', 'backups', 'sources', 'admission'],
    spec: () => ({ docker_image: 'acme/contract' }),
    printOnce: (text) => ({ run_command: `echo ${text}` }),
    printEvery: (text) => ({ run_command: `while true; do echo ${text}; sleep 1; done` }),
    // The simulated cloud runs nothing: its lines are made up, one a second per replica.
    realLogs: false,
    // The simulated git host: a repository's files are rows, the same for every commit ('').
    repository: async (files) => {
      const repo = `contract/repo-${randomUUID().slice(0, 8)}`;
      await simTables(store.db)
        .insertInto('sim_repository_files')
        .values(Object.entries(files).map(([path, content]) => ({ repo, commit_id: '', path, content })))
        .execute();
      return { git_repo_full_name: repo, git_repo_branch: 'main' };
    },
    // The simulated cloud refuses images named `refuse...` (sim-provider.ts).
    refused: { docker_image: 'refuse/contract' },
    resources: {
      makes: {
        kind: 's3',
        type: 'buckets',
        id: 'contract-bucket',
        prefix: 'contract-bucket',
        exports: {},
        skip_preview: false,
        preview_only: false,
        properties: {},
      },
      refuses: {
        kind: 'dynamodb',
        type: 'tables',
        id: 'contract-table',
        prefix: 'contract-table',
        exports: {},
        skip_preview: false,
        preview_only: false,
        properties: {},
      },
      fingerprint: async (serviceId, resource) => {
        const row = await simTables(store.db)
          .selectFrom('sim_resources')
          .select(['created_at'])
          .where('service_id', '=', serviceId)
          .where('kind', '=', resource.kind)
          .where('type', '=', resource.type)
          .where('resource_id', '=', resource.id)
          .executeTakeFirst();
        return row ? row.created_at.toISOString() : '';
      },
    },
    // The simulated cloud runs nothing: its jobs exit as their command's last `exit N` says (sim-provider.ts).
    printAndExit: (text, code) => ({ run_command: `echo ${text}; exit ${code}` }),
    serve: () => ({ type: 'web', port: 8080 }),
    // No ingress: a route leads to the deployment in place while its service runs.
    answer: async (service) => {
      const row = await simTables(store.db)
        .selectFrom('sim_workloads')
        .select(['deployment_id', 'run_status'])
        .where('service_id', '=', service.id)
        .executeTakeFirst();
      return row?.run_status === 'running' ? row.deployment_id : null;
    },
    // What each simulated replica was given.
    environments: async (serviceId, deploymentId) => {
      const row = await simTables(store.db)
        .selectFrom('sim_workloads')
        .select(['deployment_id', 'variables', 'replicas', 'run_status'])
        .where('service_id', '=', serviceId)
        .executeTakeFirst();
      return row?.run_status === 'running' && row.deployment_id === deploymentId
        ? Array.from({ length: row.replicas }, () => row.variables)
        : [];
    },
    storedSecrets: async (scope, scopeId) => {
      const rows = await simTables(store.db)
        .selectFrom('sim_secrets')
        .select(['name', 'digest'])
        .where('scope', '=', scope)
        .where('scope_id', '=', scopeId)
        .execute();
      return Object.fromEntries(rows.map((row) => [row.name, row.digest]));
    },
    failing: (desired) => ({
      ...desired,
      target: { ...desired.target, docker_image_tag: 'fail-on-purpose' },
    }),
    fingerprint: async (serviceId) => {
      const row = await simTables(store.db)
        .selectFrom('sim_workloads')
        .select(['deployment_id', 'updated_at'])
        .where('service_id', '=', serviceId)
        .executeTakeFirst();
      return row ? `${row.deployment_id}@${row.updated_at.toISOString()}` : '';
    },
    close: async () => {
      await provider.close();
      await store.close();
      await database.drop();
    },
  };
});
