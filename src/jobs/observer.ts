import type { Deps } from '../domain/usecases/context.ts';
import { observedServices, recordObservation } from '../store/repositories/observations.ts';
import { repeatEvery } from './every.ts';

/** How often what runs is observed again: drift (a container that died) shows within this. */
const OBSERVE_EVERY_MS = 10_000;

/**
 * Observes every deployed, live service now and then and writes what runs back to the store: the API
 * reads these observations instead of asking the provider on each request. Runs beside the workers;
 * several processes observing at once is harmless (an observation never overwrites a newer one). A
 * round skips the services observed since the last nine tenths of its interval began (by another
 * process's observer, or a deployment's outcome): each process still looks at every service at least
 * once an interval, and N processes no longer observe everything N times (with `berth worker`
 * processes, that was each process's CPU a service every interval).
 */
export function startObserver(
  deps: Pick<Deps, 'store' | 'provider' | 'logger'>,
  everyMs = OBSERVE_EVERY_MS,
): { stop(): Promise<void> } {
  const log = deps.logger.child({ component: 'observer' });
  const observeAll = async () => {
    const observedBefore = new Date(Date.now() - everyMs * 0.9);
    for (const service of await observedServices(deps.store.db, observedBefore)) {
      const startedAt = new Date();
      const observed = await deps.provider.observe(service);
      await recordObservation(deps.store.db, service.id, observed, startedAt);
    }
  };
  return repeatEvery(everyMs, observeAll, (err) => log.warn({ err }, 'observing services failed'));
}
