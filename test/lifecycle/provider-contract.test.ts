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
    spec: () => ({ docker_image: 'acme/contract' }),
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
