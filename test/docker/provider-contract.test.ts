import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { openProvider } from '../../src/providers/registry.ts';
import { openStore } from '../../src/store/database.ts';
import { createTestDatabase } from '../helpers/database.ts';
import {
  BASE_IMAGE,
  buildBaseImage,
  containersOfService,
  removeEnvironment,
  requireDocker,
} from '../helpers/docker.ts';
import { providerContract } from '../helpers/provider-contract.ts';

providerContract('docker', async () => {
  await requireDocker();
  await buildBaseImage();
  const database = await createTestDatabase();
  const store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
  const config = { ...loadConfig({}), provider: 'docker', providerEnv: {} };
  const provider = await openProvider(config, store.db, pino({ level: 'silent' }));
  const environment = { id: randomUUID(), account_id: randomUUID(), cloud: 'aws' as const, region: 'local' };
  const services = new Set<string>();
  return {
    provider,
    environment,
    spec: () => ({ docker_image: BASE_IMAGE.replace(/:latest$/, ''), run_command: 'sleep 3600' }),
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
      await removeEnvironment(environment.id);
      await provider.close();
      await store.close();
      await database.drop();
    },
  };
});
