import type { Config } from '../config.ts';
import type { Db } from '../store/database.ts';
import type { Provider } from './provider.ts';
import { SimProvider } from './sim/sim-provider.ts';

export class ProviderUnavailableError extends Error {}

/** The one place a provider is chosen by name. */
export function createProvider(config: Config, db: Db): Provider {
  switch (config.provider) {
    case 'sim':
      return new SimProvider(db, config.simStepMs);
    case 'docker':
    case 'kubernetes':
      throw new ProviderUnavailableError(
        `BERTH_PROVIDER=${config.provider} is not available in this version; use sim (the default)`,
      );
  }
}
