import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Db } from '../store/database.ts';
import { DockerProvider } from './docker/docker-provider.ts';
import type { Provider } from './provider.ts';
import { SimProvider } from './sim/sim-provider.ts';

export class ProviderUnavailableError extends Error {}

/** The one place a provider is chosen by name. */
export function createProvider(config: Config, db: Db, logger: Logger): Provider {
  switch (config.provider) {
    case 'sim':
      return new SimProvider(db, config.simStepMs);
    case 'docker':
      return new DockerProvider({
        db,
        logger: logger.child({ component: 'docker' }),
        ingressHost: config.ingressHost,
        ingressPort: config.ingressPort,
        publicUrl: config.publicUrl,
        listenHost: config.ingressBind,
        gitBaseUrl: config.gitBaseUrl,
        pullTimeoutMs: config.pullTimeoutMs,
      });
    case 'kubernetes':
      throw new ProviderUnavailableError(
        'BERTH_PROVIDER=kubernetes is not available in this version; use sim (the default) or docker',
      );
  }
}
