import type { Migration } from 'kysely/migration';
import type { Logger } from 'pino';
import { type Config, ConfigError } from '../config.ts';
import type { Db } from '../store/database.ts';
import { migrateDriver } from './migrations.ts';
import type { Provider } from './provider.ts';
import { SimProvider, simSettings } from './sim/sim-provider.ts';
import { simMigrations } from './sim/tables.ts';

export class ProviderUnavailableError extends Error {}

interface DriverContext {
  config: Config;
  db: Db;
  logger: Logger;
}

/**
 * The one place a driver is chosen by name. Each entry parses its driver's settings (so a bad setting
 * is refused at start) and runs its driver's own migrations before the driver is used.
 */
const DRIVERS: Record<string, (context: DriverContext) => Promise<Provider>> = {
  sim: async ({ config, db }) => {
    const settings = simSettings(config.providerEnv);
    await migrateDriver(db, 'sim', simMigrations);
    return new SimProvider(db, settings, { alone: !config.databaseUrl });
  },
  docker: async ({ config, db, logger }) => {
    // Loaded only when chosen: dockerode and what it brings (gRPC, protobuf, ssh2) are a third of the
    // modules a start would otherwise load.
    const [{ DockerProvider }, { dockerSettings }, { dockerMigrations }] = await Promise.all([
      import('./docker/docker-provider.ts'),
      import('./engine/settings.ts'),
      import('./engine/tables.ts'),
    ]);
    const settings = dockerSettings(config.providerEnv);
    await migrateDriver(db, 'docker', dockerMigrations);
    return new DockerProvider({
      db,
      logger: logger.child({ component: 'docker' }),
      settings,
    });
  },
  // Docker Engine in swarm mode: it shares the docker driver's routing table (and so its migrations).
  swarm: async ({ config, db, logger }) => {
    // Loaded only when chosen, as the docker driver.
    const [{ SwarmProvider }, { swarmSettings }, { swarmMigrations }, { dockerMigrations }] =
      await Promise.all([
        import('./swarm/swarm-provider.ts'),
        import('./swarm/settings.ts'),
        import('./swarm/tables.ts'),
        import('./engine/tables.ts'),
      ]);
    const settings = swarmSettings(config.providerEnv);
    await migrateDriver(db, 'docker', dockerMigrations);
    await migrateDriver(db, 'swarm', swarmMigrations);
    return new SwarmProvider({ db, logger: logger.child({ component: 'swarm' }), settings });
  },
  kubernetes: async () => {
    throw new ProviderUnavailableError(
      'BERTH_PROVIDER=kubernetes is not available in this version; use sim (the default), docker or swarm',
    );
  },
};

/**
 * The driver BERTH_PROVIDER names (the simulated cloud when unset), checked without opening anything:
 * a typo is refused before the database is touched.
 */
export function providerName(config: Pick<Config, 'provider'>): string {
  const name = config.provider ?? 'sim';
  if (!Object.hasOwn(DRIVERS, name)) {
    throw new ConfigError(`BERTH_PROVIDER must be one of ${Object.keys(DRIVERS).join(', ')}, got "${name}"`);
  }
  return name;
}

export async function openProvider(config: Config, db: Db, logger: Logger): Promise<Provider> {
  const open = DRIVERS[providerName(config)] as (context: DriverContext) => Promise<Provider>;
  return open({ config, db, logger });
}

/** Every driver's own migrations, by the driver's name (a restore rebuilds their tables too). */
export async function driverMigrations(): Promise<Record<string, Record<string, Migration>>> {
  const [{ dockerMigrations }, { swarmMigrations }] = await Promise.all([
    import('./engine/tables.ts'),
    import('./swarm/tables.ts'),
  ]);
  return { sim: simMigrations, docker: dockerMigrations, swarm: swarmMigrations };
}
