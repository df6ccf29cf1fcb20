import type { Deps } from '../domain/usecases/context.ts';
import { observedServices, recordObservation } from '../store/repositories/observations.ts';
import { repeatEvery } from './every.ts';

/** How often what runs is observed again: drift (a container that died) shows within this. */
const OBSERVE_EVERY_MS = 10_000;

/**
 * Observes every deployed, live service now and then and writes what runs back to the store: the API
 * reads these observations instead of asking the provider on each request. Runs beside the workers;
 * several processes observing at once is harmless (an observation never overwrites a newer one).
 */
export function startObserver(
  deps: Pick<Deps, 'store' | 'provider' | 'logger'>,
  everyMs = OBSERVE_EVERY_MS,
): { stop(): Promise<void> } {
  const log = deps.logger.child({ component: 'observer' });
  const observeAll = async () => {
    for (const service of await observedServices(deps.store.db)) {
      const startedAt = new Date();
      const observed = await deps.provider.observe(service);
      await recordObservation(deps.store.db, service.id, observed, startedAt);
    }
  };
  return repeatEvery(everyMs, observeAll, (err) => log.warn({ err }, 'observing services failed'));
}
